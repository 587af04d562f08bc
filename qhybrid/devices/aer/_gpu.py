"""Is there really a GPU for Aer? qiskit-aer-gpu lists "GPU" among its devices even on a machine without
one, so the hardware is checked separately (torch's CUDA runtime, else ``nvidia-smi -L``)."""

from __future__ import annotations

import shutil
import subprocess

from ._errors import GPUUnavailableError

NVIDIA_SMI_TIMEOUT_S = 10.0
"""How long ``nvidia-smi -L`` may take before the GPU is taken to be absent."""


def cuda_gpu_present() -> bool:
    """True when a CUDA GPU is visible to this process."""
    try:
        import torch

        if torch.cuda.is_available():
            return True
    except Exception:  # pragma: no cover - torch is a dependency, but its CUDA probe may fail oddly
        pass
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return False
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=NVIDIA_SMI_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return False
    return out.returncode == 0 and any(line.startswith("GPU ") for line in out.stdout.splitlines())


def aer_gpu_build() -> bool:
    """True when the installed Aer was built with GPU support (qiskit-aer-gpu)."""
    from qiskit_aer import AerSimulator

    return "GPU" in AerSimulator().available_devices()


def check_gpu() -> None:
    """Raise :class:`GPUUnavailableError`, saying what is missing, unless Aer can really use a GPU."""
    if not cuda_gpu_present():
        raise GPUUnavailableError(
            "device='GPU' needs a CUDA GPU, and none is visible here (torch.cuda.is_available() is False and "
            "nvidia-smi lists no GPU). Use device='CPU'."
        )
    if not aer_gpu_build():
        raise GPUUnavailableError(
            "device='GPU': this machine has a GPU, but the installed qiskit-aer has no GPU support. Install "
            "the aer-gpu extra (pip install 'qhybrid[aer-gpu]', which brings qiskit-aer-gpu in place of "
            "qiskit-aer), or use device='CPU'."
        )


__all__ = ["cuda_gpu_present", "aer_gpu_build", "check_gpu"]
