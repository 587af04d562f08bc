import sys, time, torch, pennylane as qml, qhybrid, statistics as st
from qhybrid.devices.tensornet import _bound
torch.set_num_threads(int(sys.argv[1]) if len(sys.argv) > 1 else 1)
torch.manual_seed(0)
x = torch.rand(128, 8, dtype=torch.float64, requires_grad=True)
layer = qhybrid.ExpQLayer(8, 4).double()
def step():
    out = layer(x); out.sum().backward()
def fwd():
    layer(x)
res = {}
for flag in (True, False):
    _bound.ENABLED = flag
    for _ in range(3): step()
R = int(sys.argv[2]) if len(sys.argv) > 2 else 20
for r in range(R):
    for flag in (True, False):
        _bound.ENABLED = flag
        for name, f in (("step", step), ("fwd", fwd)):
            t = time.thread_time(); f(); res.setdefault((name, flag), []).append(time.thread_time() - t)
for k, v in sorted(res.items()):
    print(k, "median %.2f min %.2f ms" % (st.median(v)*1e3, min(v)*1e3))
from torch.profiler import profile, ProfilerActivity
for flag in (True, False):
    _bound.ENABLED = flag
    with profile(activities=[ProfilerActivity.CPU]) as p:
        step()
    ev = p.key_averages()
    print("bound" if flag else "old", "aten ops (all levels):", sum(e.count for e in ev if e.key.startswith("aten::")))
