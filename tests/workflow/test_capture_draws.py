"""Noise trajectories under capture (``qhybrid.cuda_graph``): each graph registers the devices' CUDA generators as
its capture begins, so a replay draws anew. The registration is checked here with a stand-in graph class; the
capture itself, and that replays draw fresh trajectories whose mean is the exact channel's, run on a GPU
(``test_capture_engines.py``)."""

from __future__ import annotations

import importlib
import types

import torch

from qhybrid.devices.tensornet.engines.mixed.trajectories import NoiseDraws, cuda_generators

capture = importlib.import_module("qhybrid.workflow.cuda_graph")


def test_a_capture_registers_the_cuda_generators_of_the_current_device_before_it_begins(monkeypatch):
    events = []

    class Graph:  # torch.cuda.CUDAGraph's two methods that matter here
        def register_generator_state(self, generator):
            events.append(generator)

        def capture_begin(self, *args, **kwargs):
            events.append("begin")

    here, other = types.SimpleNamespace(device=torch.device("cuda", 0)), types.SimpleNamespace(device=torch.device("cuda", 1))
    monkeypatch.setattr(torch.cuda, "CUDAGraph", Graph)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(capture, "cuda_generators", lambda: [here, other])
    with capture._draws_registered():
        graph = torch.cuda.CUDAGraph()
        graph.capture_begin()
    assert events == [here, "begin"]
    assert torch.cuda.CUDAGraph is Graph  # put back afterwards


def test_a_torch_without_generator_registration_captures_as_before(monkeypatch):
    class Graph:
        pass

    monkeypatch.setattr(torch.cuda, "CUDAGraph", Graph)
    with capture._draws_registered():
        assert torch.cuda.CUDAGraph is Graph


def test_only_cuda_generators_are_listed():
    draws = NoiseDraws(seed=3)
    draws.generator(torch.device("cpu"))
    assert all(g.device.type == "cuda" for g in cuda_generators())
    assert draws.generator(torch.device("cpu")) not in cuda_generators()
