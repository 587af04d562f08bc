"""Independent references for the circuit layers: the same circuits written gate by gate (or with the
PennyLane templates) and run on ``default.qubit`` with torch backprop."""

from __future__ import annotations

import pennylane as qml
import torch

REF_DEVICE = qml.device("default.qubit")


def encode(x, wires, encoding, rotation):
    if encoding == "angle":
        qml.AngleEmbedding(x, wires=wires[: x.shape[-1]], rotation=rotation)
    elif encoding == "amplitude":
        qml.AmplitudeEmbedding(x, wires=wires, pad_with=0.0, normalize=True)
    elif encoding == "iqp":
        qml.IQPEmbedding(x, wires=wires)
    else:
        raise ValueError(encoding)


def ansatz_layer(w, wires, ansatz, index):
    """One layer, written gate by gate (independent of qhybrid's builder and of PennyLane's templates)."""
    n = len(wires)
    if ansatz == "strongly-entangling":
        for i in range(n):
            qml.Rot(w[i, 0], w[i, 1], w[i, 2], wires=wires[i])
        if n > 1:
            r = index % (n - 1) + 1
            for i in range(n):
                qml.CNOT(wires=[wires[i], wires[(i + r) % n]])
    elif ansatz == "basic-entangler":
        for i in range(n):
            qml.RX(w[i], wires=wires[i])
        if n == 2:
            qml.CNOT(wires=wires)
        elif n > 2:
            for i in range(n):
                qml.CNOT(wires=[wires[i], wires[(i + 1) % n]])
    elif ansatz == "hardware-efficient":
        for i in range(n):
            qml.RY(w[i], wires=wires[i])
        for i in range(n - 1):
            qml.CZ(wires=[wires[i], wires[i + 1]])
    else:
        ansatz(w, wires)


def template(w, wires, ansatz):
    """All layers at once with PennyLane's own templates (no re-uploading)."""
    if ansatz == "strongly-entangling":
        qml.StronglyEntanglingLayers(w, wires=wires)
    elif ansatz == "basic-entangler":
        qml.BasicEntanglerLayers(w, wires=wires)
    else:
        for index in range(w.shape[0]):
            ansatz_layer(w[index], wires, ansatz, index)


def reference_qnode(measure, *, wires, encoding="angle", rotation="Y", ansatz="strongly-entangling", reupload=False):
    """A default.qubit torch QNode ``f(x, w)`` computing what the layer should compute; ``measure(wires)``
    returns the measurements."""
    wires = list(wires)

    def circuit(x, w):
        if reupload:
            for index in range(w.shape[0]):
                encode(x, wires, encoding, rotation)
                ansatz_layer(w[index], wires, ansatz, index)
        else:
            encode(x, wires, encoding, rotation)
            template(w, wires, ansatz)
        return measure(wires)

    return qml.qnode(REF_DEVICE, interface="torch", diff_method="backprop")(circuit)


def jacobians(out: torch.Tensor, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    """Full Jacobians d out / d input for each input, one backward pass per output entry."""
    flat = out.reshape(-1)
    rows = [torch.autograd.grad(flat[k], inputs, retain_graph=True, allow_unused=True) for k in range(flat.numel())]
    jac = []
    for j, t in enumerate(inputs):
        per = [torch.zeros_like(t) if r[j] is None else r[j] for r in rows]
        jac.append(torch.stack(per).reshape(*out.shape, *t.shape))
    return jac
