"""Torch layers built from circuits: ExpQLayer (expectation values), QLayer (probabilities),
ArgMax / ArgMaxQLayer (most probable bitstring with a straight-through gradient) and TorchLayer (any qnode).
"""

from ._ansatz import Ansatz, get_ansatz
from ._encodings import Encoding, get_encoding
from .argmax import ArgMax, ArgMaxQLayer
from .exp_qlayer import ExpQLayer
from .qlayer import QLayer
from .torch_layer import TorchLayer

__all__ = [
    "ExpQLayer",
    "QLayer",
    "ArgMax",
    "ArgMaxQLayer",
    "TorchLayer",
    "Ansatz",
    "Encoding",
    "get_ansatz",
    "get_encoding",
]
