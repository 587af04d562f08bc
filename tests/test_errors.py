"""Bad input gets a clear error that names the offending thing, never a silent wrong number."""

import math

import pennylane as qml
import pytest
import torch

import qhybrid
from qhybrid.errors import (
    BroadcastError,
    ContractionTooLargeError,
    GradientError,
    UnsupportedOperationError,
    WireError,
)


class NoMatrixNoDecomposition(qml.operation.Operation):
    num_wires = 1
    num_params = 0


def test_undecomposable_operation_names_itself():
    tape = qml.tape.QuantumScript([NoMatrixNoDecomposition(wires=0)], [qml.expval(qml.Z(0))])
    with pytest.raises(UnsupportedOperationError, match="NoMatrixNoDecomposition"):
        qhybrid.execute([tape], qhybrid.device("tensornet", wires=1))


def test_template_without_matrix_is_decomposed():
    x = torch.tensor([0.1, 0.2], dtype=torch.float64)
    tape = qml.tape.QuantumScript([qml.AngleEmbedding(x, wires=[0, 1])], [qml.expval(qml.Z(1))])
    (res,) = qhybrid.execute([tape], qhybrid.device("tensornet", wires=2))
    torch.testing.assert_close(res, torch.cos(x[1]), atol=1e-12, rtol=0)


def test_unknown_wires():
    tape = qml.tape.QuantumScript([qml.RX(0.1, wires="a")], [qml.expval(qml.Z("a"))])
    with pytest.raises(Exception, match="a"):
        qhybrid.execute([tape], qhybrid.device("tensornet", wires=2))
    from qhybrid.devices.tensornet._structure import tape_structure

    with pytest.raises(WireError, match=r"\['a'\]"):
        tape_structure(tape, qml.wires.Wires([0, 1]))


def test_mismatched_broadcast_sizes():
    ops = [qml.RX(torch.rand(3), 0), qml.RY(torch.rand(4), 1)]
    tape = qml.tape.QuantumScript(ops, [qml.expval(qml.Z(0))])
    with pytest.raises((BroadcastError, ValueError), match="3|4"):
        qhybrid.execute([tape], qhybrid.device("tensornet", wires=2))
    from qhybrid.devices.tensornet._structure import tape_structure

    with pytest.raises(BroadcastError, match=r"RX\[0\]: 3.*RY\[1\]: 4"):
        tape_structure(tape, None)


def test_adjoint_with_shots_names_the_fix():
    dev = qhybrid.device("tensornet", wires=1, shots=100)
    with pytest.raises(GradientError, match="parameter-shift"):
        qhybrid.AdjointTN(dev)


def test_best_with_shots_picks_parameter_shift():
    from qhybrid.gradients import get_jpc

    assert get_jpc("best", qhybrid.device("tensornet", wires=1, shots=100)).name == "parameter-shift"
    assert get_jpc("best", qhybrid.device("tensornet", wires=1)).name == "adjoint"


def test_contraction_over_max_memory_is_refused_with_its_estimate():
    dev = qhybrid.device("tensornet", wires=12, max_memory=1e4)
    ops = [qml.Hadamard(i) for i in range(12)]
    tape = qml.tape.QuantumScript(ops, [qml.state()])
    with pytest.raises(ContractionTooLargeError, match=r"64\.0 KiB.*4096 elements"):
        qhybrid.execute([tape], dev)


def test_wide_state_is_refused_before_allocation():
    dev = qhybrid.device("tensornet", wires=40)
    tape = qml.tape.QuantumScript([qml.Hadamard(i) for i in range(40)], [qml.state()])
    with pytest.raises((ContractionTooLargeError, UnsupportedOperationError), match="state|TiB"):
        qhybrid.execute([tape], dev)


def test_unknown_diff_method():
    tape = qml.tape.QuantumScript([qml.RX(0.1, 0)], [qml.expval(qml.Z(0))])
    with pytest.raises(ValueError, match="finite-diff"):
        qhybrid.execute([tape], qhybrid.device("tensornet", wires=1), diff_method="finite-diff")


def test_parameter_shift_on_matrix_parameter_names_op():
    u = torch.eye(2, dtype=torch.complex128, requires_grad=True)
    tape = qml.tape.QuantumScript([qml.QubitUnitary(u, wires=0)], [qml.expval(qml.Z(0))])
    (res,) = qhybrid.execute([tape], qhybrid.device("tensornet", wires=1), diff_method="parameter-shift")
    with pytest.raises(GradientError, match="QubitUnitary"):
        res.backward()


def test_bad_dtype_and_backend():
    with pytest.raises(ValueError, match="complex128"):
        qhybrid.device("tensornet", wires=1, dtype=torch.float64)
    with pytest.raises(ValueError, match="backend"):
        qhybrid.device("tensornet", wires=1, backend="numpy")
    with pytest.raises(ValueError, match="tensornet"):
        qhybrid.device("nope", wires=1)


@pytest.mark.parametrize(
    "op",
    [
        lambda: qml.RX(torch.tensor(0.3 + 0.1j), wires=0),
        lambda: qml.Rot(0.1, torch.tensor(0.2 + 0.0j), 0.3, wires=0),
        lambda: qml.IsingXY(0.3 + 0.1j, wires=[0, 1]),
    ],
)
def test_complex_gate_parameters_are_refused_with_the_gate_named(op):
    """A complex angle makes a non-unitary gate: refused, never silently truncated to its real part."""
    gate = op()
    tape = qml.tape.QuantumScript([gate], [qml.expval(qml.Z(0))])
    with pytest.raises(UnsupportedOperationError, match=f"{gate.name} on wires .* complex parameter"):
        qhybrid.execute([tape], qhybrid.device("tensornet", wires=2))


def test_an_exponential_with_a_real_part_in_its_coefficient_is_refused():
    """``qml.exp(P, c)`` is unitary only for an imaginary ``c`` (which runs: tests/devices/tensornet/
    test_imaginary_exponents.py); a real part would make it non-unitary: refused, never truncated to a rotation."""
    t = torch.tensor(0.7, dtype=torch.float64)
    tape = qml.tape.QuantumScript(
        [qml.Hadamard(0), qml.exp(qml.Z(0) @ qml.X(1), 0.1 - 0.5j * t)], [qml.expval(qml.Y(0) @ qml.X(1))]
    )
    with pytest.raises(UnsupportedOperationError, match=r"Exp on wires \[0, 1\] got the coefficient .*unitary only for an imaginary c"):
        qhybrid.execute([tape], qhybrid.device("tensornet", wires=2))


def test_complex_matrices_stay_accepted():
    u = torch.tensor([[0.0, 1.0j], [1.0j, 0.0]], dtype=torch.complex128)
    tape = qml.tape.QuantumScript([qml.QubitUnitary(u, wires=0)], [qml.expval(qml.Z(0))])
    (res,) = qhybrid.execute([tape], qhybrid.device("tensornet", wires=1))
    assert abs(float(res) + 1.0) < 1e-12


@pytest.mark.parametrize("diff_method", ["adjoint", "backprop"])
def test_plain_pennylane_adjoint_with_shots_names_the_fix(diff_method):
    dev = qml.device("qhybrid.tensornet", wires=1, shots=100)

    @qml.qnode(dev, interface="torch", diff_method=diff_method)
    def f(x):
        qml.RX(x, 0)
        return qml.expval(qml.Z(0))

    with pytest.raises(qml.exceptions.QuantumFunctionError, match="parameter-shift") as info:
        f(torch.tensor(0.3, requires_grad=True))
    assert isinstance(info.value, GradientError)


def _rx_circuit(x):
    qml.RX(x, 0)
    return qml.expval(qml.Z(0))


@pytest.mark.parametrize("where", ["device shots", "tape shots", "plain PennyLane"])
@pytest.mark.parametrize("diff_method", ["adjoint", "backprop"])
def test_shots_error_names_the_method_asked_for_and_the_fix(diff_method, where):
    """Issue 20, item 5: backprop with shots said "diff_method='adjoint' needs analytic results"; with
    shots on the tape (not the device) qhybrid.execute gave a silent zero gradient (adjoint) or torch's
    "does not require grad" (backprop)."""
    other = {"adjoint": "backprop", "backprop": "adjoint"}[diff_method]
    x = torch.tensor(0.3, dtype=torch.float64, requires_grad=True)
    with pytest.raises(GradientError, match=rf"diff_method='{diff_method}'.*diff_method='parameter-shift'") as info:
        if where == "device shots":
            qhybrid.qnode(qhybrid.device("tensornet", wires=1, shots=100), diff_method=diff_method)(_rx_circuit)(x)
        elif where == "tape shots":
            tape = qml.tape.QuantumScript([qml.RX(x, 0)], [qml.expval(qml.Z(0))], shots=100)
            (res,) = qhybrid.execute([tape], qhybrid.device("tensornet", wires=1), diff_method=diff_method)
            res.backward()
        else:
            dev = qml.device("qhybrid.tensornet", wires=1, shots=100)
            qml.qnode(dev, interface="torch", diff_method=diff_method)(_rx_circuit)(x)
    assert other not in str(info.value)


def test_best_with_shots_on_the_tape_differentiates_by_parameter_shift():
    x = torch.tensor(0.3, dtype=torch.float64, requires_grad=True)
    tape = qml.tape.QuantumScript([qml.RX(x, 0)], [qml.expval(qml.Z(0))], shots=20000)
    (res,) = qhybrid.execute([tape], qhybrid.device("tensornet", wires=1, seed=7))
    res.backward()
    assert abs(x.grad.item() + math.sin(0.3)) < 0.03  # about 4 standard deviations of the shot noise


@pytest.mark.parametrize("value", [float("nan"), -1, 0, "1 GiB", True])
def test_max_memory_must_be_a_positive_number(value):
    with pytest.raises(ValueError, match="max_memory=.*positive number of bytes"):
        qhybrid.device("tensornet", wires=1, max_memory=value)


def test_a_meta_tensor_is_refused_by_name():
    """A parameter on the meta device (a model built with ``device="meta"`` not yet materialised) failed in a sparse
    kernel ("Could not run 'aten::addmm.out' ... 'SparseCsrMeta'"; found by a fuzzing helper)."""

    @qhybrid.qnode(qhybrid.device("tensornet", wires=2))
    def circuit(x):
        qml.RX(x[0], 0)
        qml.RY(x[1], 1)
        return qml.expval(qml.Z(0) @ qml.X(1))

    with pytest.raises(ValueError, match="meta device .* Materialise it"):
        circuit(torch.empty(2, device="meta"))


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present: result_device='cuda' is valid")
def test_result_device_cuda_without_cuda_is_refused_before_the_run():
    """torch's own "not compiled with CUDA" came after the forward had run (found by a fuzzing helper)."""
    tape = qml.tape.QuantumScript([qml.RX(torch.tensor(0.3), 0)], [qml.expval(qml.Z(0))])
    with pytest.raises(ValueError, match="result_device='cuda', but this torch sees no CUDA device"):
        qhybrid.execute([tape], qhybrid.device("tensornet", wires=1), result_device="cuda")


@pytest.mark.parametrize("diff_method", ["adjoint", "backprop"])
def test_an_unused_gradient_device_is_said(diff_method, monkeypatch):
    """``gradient_device`` runs parameter-shift's shifted circuits; with adjoint or backprop it was ignored silently
    (found by a fuzzing helper)."""
    from qhybrid.gradients import jpc

    monkeypatch.setattr(jpc, "_NOTED", set())
    x = torch.tensor(0.3, dtype=torch.float64, requires_grad=True)
    tape = qml.tape.QuantumScript([qml.RX(x, 0)], [qml.expval(qml.Z(0))])
    said = f"gradient_device is used by parameter-shift only.*'{diff_method}'"
    with pytest.warns(qhybrid.errors.QhybridWarning, match=said):
        out = qhybrid.execute([tape], qhybrid.device("tensornet", wires=1), diff_method=diff_method,
                              gradient_device=qhybrid.device("tensornet", wires=1))  # fmt: skip
    out[0].backward()
    torch.testing.assert_close(x.grad, -torch.sin(x.detach()), atol=1e-12, rtol=0)
