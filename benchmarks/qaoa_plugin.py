"""QAOA parameter-shift step (issue 13, item 4b): plain PennyLane on qhybrid.tensornet vs qhybrid.qnode vs
default.qubit, alternating in one process, median of 5 after 2 warm-ups.

    python -m benchmarks.qaoa_plugin [DEPTH]     # DEPTH 2 (default) or 3

Max-cut on the complete 4-node graph (``qml.qaoa.maxcut``: 12-term cost Hamiltonian, 4-term mixer), one
step = ``expval(cost)`` forward + backward by parameter-shift. Also prints each system's value and gradient
error against default.qubit.
"""
import sys, time, statistics, torch, networkx as nx, pennylane as qml
import qhybrid

# 4-qubit states: intra-op threads only add synchronisation (10x slower on a shared 2-core box)
torch.set_num_threads(1)
DEPTH = int(sys.argv[1]) if len(sys.argv) > 1 else 2
cost_h, mixer_h = qml.qaoa.maxcut(nx.complete_graph(4))
def circuit(params):
    for w in range(4): qml.Hadamard(w)
    for k in range(DEPTH):
        qml.qaoa.cost_layer(params[0, k], cost_h)
        qml.qaoa.mixer_layer(params[1, k], mixer_h)
    return qml.expval(cost_h)
nodes = {
  "plugin": qml.qnode(qml.device("qhybrid.tensornet", wires=4), diff_method="parameter-shift", interface="torch")(circuit),
  "native": qhybrid.qnode(qhybrid.device("tensornet", wires=4), diff_method="parameter-shift")(circuit),
  "default": qml.qnode(qml.device("default.qubit", wires=4), diff_method="parameter-shift", interface="torch")(circuit),
}
p0 = torch.tensor([[0.3, 0.7, 0.2][:DEPTH], [0.5, 0.1, 0.9][:DEPTH]], dtype=torch.float64)
def step(f):
    p = p0.clone().requires_grad_()
    v = f(p); v.backward(); return v.detach(), p.grad
ref = step(nodes["default"])
for k, f in nodes.items():
    v, g = step(f); print(k, float(v - ref[0]), float((g - ref[1]).abs().max()))
times = {k: [] for k in nodes}
for rep in range(7):
    for k, f in nodes.items():
        t = time.perf_counter(); step(f); dt = time.perf_counter() - t
        if rep >= 2: times[k].append(dt)
for k, ts in times.items(): print(f"{k:8s} median {1e3*statistics.median(ts):7.1f} ms  ({', '.join(f'{1e3*t:.0f}' for t in ts)})")
