"""``qhybrid.device(name, ...)``: devices by short name."""

from __future__ import annotations


def device(name: str, wires=None, **options):
    """A qhybrid device: ``"tensornet"`` (or ``"qhybrid.tensornet"``) and, with the aer extra, ``"aer"``.

    >>> import qhybrid
    >>> qhybrid.device("tensornet", wires=4).name
    'qhybrid.tensornet'
    """
    short = name.removeprefix("qhybrid.")
    if short == "tensornet":
        from ..devices.tensornet import TensorNetworkDevice

        return TensorNetworkDevice(wires=wires, **options)
    if short == "aer":
        try:
            from ..devices.aer import AerDevice
        except ImportError as exc:
            raise ImportError(
                "The aer device needs qiskit and qiskit-aer: pip install 'qhybrid[aer]'."
            ) from exc
        return AerDevice(wires=wires, **options)
    raise ValueError(f"Unknown device {name!r}; qhybrid offers 'tensornet' and 'aer'.")
