"""An independent light-cone reference: wide circuits measured term by term on PennyLane default.qubit.

A circuit is given as a list of *blocks*, each a list of gates that commute with each other (a QAOA cost
layer, a layer of single-qubit rotations; a single gate is a block of its own). For one Pauli word the
window is found walking the blocks backwards: a block's gates that touch the window as it stands at the
block's end join it (commuting gates see the same window). Every gate that lies wholly inside the window
is then simulated on default.qubit (torch backprop) over the window's wires only; gates that reach outside
the window are not in the light cone and cancel. No code is shared with qhybrid's cone engine.
"""

from __future__ import annotations

import pennylane as qml
import torch

REF_DEVICE = qml.device("default.qubit")


def window(blocks, wires) -> set:
    support = set(wires)
    for block in reversed(blocks):
        touching = [op for op in block if support.intersection(op.wires.labels)]
        for op in touching:
            support.update(op.wires.labels)
    return support


def word_expval(blocks, word: qml.pauli.PauliWord) -> torch.Tensor:
    """<word> of the circuit, simulated on the word's window only."""
    support = window(blocks, list(word.keys()))
    ops = [op for block in blocks for op in block if set(op.wires.labels) <= support]

    @qml.qnode(REF_DEVICE, interface="torch", diff_method="backprop")
    def circuit():
        for op in ops:
            qml.apply(op)
        return qml.expval(word.operation())

    return circuit()


def sentence_expval(blocks, ps: qml.pauli.PauliSentence) -> torch.Tensor:
    total = 0.0
    for word, coeff in ps.items():
        value = torch.tensor(1.0, dtype=torch.float64) if not word else word_expval(blocks, word)
        total = total + (coeff.real if isinstance(coeff, complex) else coeff) * value
    return total


def expval(blocks, observable) -> torch.Tensor:
    return sentence_expval(blocks, observable.pauli_rep)


def var(blocks, observable) -> torch.Tensor:
    ps = observable.pauli_rep
    return sentence_expval(blocks, ps @ ps) - sentence_expval(blocks, ps) ** 2


def qaoa_blocks(edges, n_nodes, gamma, beta):
    """H on every node, then per layer one IsingZZ(2 gamma_l) per edge and one RX(2 beta_l) per node."""
    blocks = [[qml.Hadamard(i) for i in range(n_nodes)]]
    for l in range(len(gamma)):
        blocks.append([qml.IsingZZ(2 * gamma[l], wires=e) for e in edges])
        blocks.append([qml.RX(2 * beta[l], wires=i) for i in range(n_nodes)])
    return blocks


__all__ = ["window", "word_expval", "sentence_expval", "expval", "var", "qaoa_blocks"]
