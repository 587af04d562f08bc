import sys, time, torch, pennylane as qml, qhybrid, statistics as st
torch.set_num_threads(int(sys.argv[1]) if len(sys.argv) > 1 else 1)
torch.manual_seed(0)
x = torch.rand(128, 8, dtype=torch.float64, requires_grad=True)
layer = qhybrid.ExpQLayer(8, 4).double()
dev = qhybrid.device("tensornet", wires=8)
@qhybrid.qnode(dev)
def circ(inputs, w):
    qml.AngleEmbedding(inputs, wires=range(8), rotation="Y")
    qml.StronglyEntanglingLayers(w, wires=range(8))
    return [qml.expval(qml.Z(i)) for i in range(8)]
w = layer.weight
def step_layer():
    out = layer(x); out.sum().backward()
def step_qnode():
    out = torch.stack(circ(x, w), -1); out.sum().backward()
def fwd_layer():
    return layer(x)
fns = {"layer": step_layer, "qnode": step_qnode}
for f in fns.values():
    for _ in range(3): f()
res = {k: [] for k in fns}
for r in range(15):
    for k, f in fns.items():
        t = time.perf_counter(); f(); res[k].append(time.perf_counter() - t)
for k, v in res.items(): print(k, "median ms", round(st.median(v)*1e3, 2), "min", round(min(v)*1e3,2))
# fwd only
ts=[]
for r in range(15):
    t=time.perf_counter(); out=layer(x); ts.append(time.perf_counter()-t)
print("layer fwd median ms", round(st.median(ts)*1e3,2))
ts=[]
for r in range(15):
    out=layer(x); l=out.sum()
    t=time.perf_counter(); l.backward(); ts.append(time.perf_counter()-t)
print("layer bwd median ms", round(st.median(ts)*1e3,2))
