"""Detecting a real GPU for Aer (qiskit-aer-gpu reports GPU support without one)."""

import subprocess

import pytest

pytest.importorskip("qiskit", reason="the aer extra (qiskit) is not installed")  # before the qiskit imports below

from qhybrid.devices.aer import _gpu
from qhybrid.devices.aer._errors import GPUUnavailableError


def test_no_gpu_hardware(monkeypatch):
    monkeypatch.setattr(_gpu, "cuda_gpu_present", lambda: False)
    monkeypatch.setattr(_gpu, "aer_gpu_build", lambda: True)  # what qiskit-aer-gpu says on a CPU machine
    with pytest.raises(GPUUnavailableError, match="none is visible"):
        _gpu.check_gpu()


def test_gpu_but_cpu_only_aer(monkeypatch):
    monkeypatch.setattr(_gpu, "cuda_gpu_present", lambda: True)
    monkeypatch.setattr(_gpu, "aer_gpu_build", lambda: False)
    with pytest.raises(GPUUnavailableError, match="aer-gpu"):
        _gpu.check_gpu()


def test_nvidia_smi_is_read(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(_gpu.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    listing = subprocess.CompletedProcess([], 0, stdout="GPU 0: NVIDIA H100 (UUID: GPU-x)\n")
    monkeypatch.setattr(_gpu.subprocess, "run", lambda *a, **k: listing)
    assert _gpu.cuda_gpu_present()
    monkeypatch.setattr(_gpu.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess([], 9, stdout="No devices"))
    assert not _gpu.cuda_gpu_present()
    monkeypatch.setattr(_gpu.shutil, "which", lambda name: None)
    assert not _gpu.cuda_gpu_present()


@pytest.mark.gpu
def test_gpu_is_detected_on_a_gpu_machine():
    assert _gpu.cuda_gpu_present()
