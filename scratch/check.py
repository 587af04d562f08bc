import torch, pennylane as qml, qhybrid
torch.manual_seed(1)
n=4
x = torch.rand(5, n, dtype=torch.float64, requires_grad=True)
w = torch.rand(2, n, 3, dtype=torch.float64, requires_grad=True)
def body(inputs, w):
    qml.AngleEmbedding(inputs, wires=range(n), rotation="Y")
    qml.StronglyEntanglingLayers(w, wires=range(n))
    qml.CRX(w[0,0,0], wires=[2, 0])
    qml.IsingZZ(w[0,1,1], wires=[1, 3])
    qml.PhaseShift(w[1,1,1], wires=[1])
    qml.RX(inputs[:, 0], wires=2)
    qml.Hadamard(1)
    qml.CRot(w[1,0,0], w[1,0,1], w[1, 0, 2], wires=[3, 1])
    qml.ControlledPhaseShift(w[1,2,2], wires=[0, 2])
    qml.RZ(w[1,3,0], wires=[3])
    return [qml.expval(qml.Z(i)) for i in range(n)] 
q = qhybrid.qnode(qhybrid.device("tensornet", wires=n))(body)
r = qml.QNode(body, qml.device("default.qubit", wires=n), interface="torch")
for f in (q, r):
    out = torch.stack(list(f(x, w)), -1)
    gx, gw = torch.autograd.grad((out * torch.arange(1., n+1, dtype=torch.float64)).sum(), (x, w))
    print(out.sum().item(), gx.sum().item(), gw.sum().item())
    res = (out, gx, gw) if f is q else res
ref = (out, gx, gw)
print([float((a-b).abs().max()) for a, b in zip(res, ref)])
from qhybrid.devices.tensornet import _bound
print("bound used:", any(k[0]=="bound" for k in []))
for it in range(2):
    out = torch.stack(list(q(x, w)), -1)
    print(out.grad_fn.next_functions[0][0].name())
    gx2, gw2 = torch.autograd.grad((out * torch.arange(1., n+1, dtype=torch.float64)).sum(), (x, w))
    print([float((a-b).abs().max()) for a, b in zip((out.detach(), gx2, gw2), ref)])
# double backward
out = torch.stack(list(q(x, w)), -1)
gw = torch.autograd.grad(out.sum(), w, create_graph=True)[0]
hw = torch.autograd.grad(gw.sum(), w)[0]
out = torch.stack(list(r(x, w)), -1)
gwr = torch.autograd.grad(out.sum(), w, create_graph=True)[0]
hwr = torch.autograd.grad(gwr.sum(), w)[0]
print("hess", float((hw-hwr).abs().max()))
