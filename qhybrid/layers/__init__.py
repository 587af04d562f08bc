"""Torch layers built from circuits: ExpQLayer (expectation values), QLayer (probabilities),
GraphQLayer (QAOA / QGNN circuits on a graph), ArgMax / ArgMaxQLayer (most probable bitstring with a straight-through gradient) and TorchLayer (any qnode).
"""

from ._ansatz import Ansatz, get_ansatz
from ._encodings import Encoding, get_encoding
from .argmax import ArgMax, ArgMaxQLayer
from .exp_qlayer import ExpQLayer
from .graph_layer import GraphQLayer
from .qlayer import QLayer
from .torch_layer import TorchLayer

__all__ = [
    "ExpQLayer",
    "GraphQLayer",
    "QLayer",
    "ArgMax",
    "ArgMaxQLayer",
    "TorchLayer",
    "Ansatz",
    "Encoding",
    "get_ansatz",
    "get_encoding",
]
