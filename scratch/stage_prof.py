"""Time per stage of a W1 ExpQLayer step (thread CPU time, medians over many steps)."""
import sys, time, statistics as st, functools, torch
torch.set_num_threads(1)
import qhybrid
torch.manual_seed(0)
x = torch.rand(128, 8, dtype=torch.float64, requires_grad=True)
layer = qhybrid.ExpQLayer(8, 4).double()
acc = {}
def wrap(mod, name, label):
    f = getattr(mod, name)
    @functools.wraps(f)
    def g(*a, **k):
        t = time.thread_time()
        try:
            return f(*a, **k)
        finally:
            acc.setdefault(label, 0.0)
            acc[label] += time.thread_time() - t
    setattr(mod, name, g)
import importlib
targets = [l.split(":", 2) for l in sys.argv[1:]]
for modname, attr, label in targets:
    mod = importlib.import_module(modname)
    if "." in attr:
        cls, meth = attr.split(".")
        wrap(getattr(mod, cls), meth, label)
    else:
        wrap(mod, attr, label)
def step():
    out = layer(x); out.sum().backward()
for _ in range(5): step()
per = {}
for _ in range(60):
    acc.clear()
    t = time.thread_time(); out = layer(x); t1 = time.thread_time(); out.sum().backward(); t2 = time.thread_time()
    acc["forward total"] = t1 - t; acc["backward total"] = t2 - t1
    for k, v in acc.items(): per.setdefault(k, []).append(v)
for k, v in per.items(): print("%-40s %.3f ms" % (k, st.median(v) * 1e3))
