import sys, time, torch, pennylane as qml, qhybrid, statistics as st
from qhybrid.interfaces._preprocess import preprocess
from qhybrid.gradients._execute import execute_variants
from qhybrid.gradients.jpc import get_jpc
torch.set_num_threads(1)
torch.manual_seed(0)
x = torch.rand(128, 8, dtype=torch.float64, requires_grad=True)
layer = qhybrid.ExpQLayer(8, 4).double()
w = layer.weight
dev = qhybrid.device("tensornet", wires=8)
@qhybrid.qnode(dev)
def circ(inputs, w):
    qml.AngleEmbedding(inputs, wires=range(8), rotation="Y")
    qml.StronglyEntanglingLayers(w, wires=range(8))
    return [qml.expval(qml.Z(i)) for i in range(8)]
def T(f, n=30):
    for _ in range(3): f()
    ts=[]
    for _ in range(n):
        t=time.perf_counter(); f(); ts.append(time.perf_counter()-t)
    return (round(st.median(ts)*1e3,3), round(min(ts)*1e3,3))
print("full step", T(lambda: torch.stack(circ(x, w), -1).sum().backward()))
print("construct", T(lambda: circ.construct((x, w), {})))
tape,_ = circ.construct((x, w), {})
print("preprocess", T(lambda: preprocess(dev, [tape])))
jpc = get_jpc("best", dev, None)
def ev():
    variants, post = preprocess(dev, [tape])
    return execute_variants(variants, jpc)
print("preprocess+exec fwd", T(ev))
def evb():
    r = ev(); torch.stack(r[0], -1).sum().backward()
print("preprocess+exec fwd+bwd", T(evb))
with torch.no_grad():
    print("no-grad exec", T(ev))
