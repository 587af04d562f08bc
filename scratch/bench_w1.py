import sys, time, statistics as st, torch, pennylane as qml
threads = int(sys.argv[1]); which = sys.argv[2]; reps = int(sys.argv[3])
torch.set_num_threads(threads)
import qhybrid
torch.manual_seed(0)
x = torch.rand(128, 8, dtype=torch.float64, requires_grad=True)
w = (torch.rand(4, 8, 3, dtype=torch.float64) * 6).requires_grad_()
def body(inputs, w):
    qml.AngleEmbedding(inputs, wires=range(8), rotation="Y")
    qml.StronglyEntanglingLayers(w, wires=range(8))
    return [qml.expval(qml.Z(i)) for i in range(8)]
if which == "layer":
    layer = qhybrid.ExpQLayer(8, 4).double()
    f = lambda: layer(x)
elif which == "qnode":
    kw = {"static_structure": True} if "static_structure" in qhybrid.qnode.__code__.co_varnames else {}
    q = qhybrid.qnode(qhybrid.device("tensornet", wires=8), **kw)(body)
    f = lambda: torch.stack(q(x, w), -1)
elif which == "dq":
    q = qml.QNode(body, qml.device("default.qubit", wires=8), interface="torch", diff_method="backprop")
    f = lambda: torch.stack(q(x, w), -1)
for _ in range(3):
    f().sum().backward()
res = {"step": [], "fwd": [], "bwd": [], "step_cpu": []}
for _ in range(reps):
    t0 = time.perf_counter(); c0 = time.process_time()
    out = f(); t1 = time.perf_counter()
    out.sum().backward(); t2 = time.perf_counter(); c2 = time.process_time()
    res["step"].append(t2 - t0); res["fwd"].append(t1 - t0); res["bwd"].append(t2 - t1); res["step_cpu"].append(c2 - c0)
print(qhybrid.__file__.split("/")[2], which, "threads", torch.get_num_threads(), " ".join("%s %.2f" % (k, st.median(v) * 1e3) for k, v in res.items()), "bwd/fwd %.2f" % (st.median(res["bwd"]) / st.median(res["fwd"])))
