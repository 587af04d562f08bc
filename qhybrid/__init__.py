"""qhybrid: torch-native hybrid quantum-classical machine learning.

>>> import qhybrid, pennylane as qml, torch
>>> dev = qhybrid.device("tensornet", wires=2)
>>> @qhybrid.qnode(dev, diff_method="adjoint")
... def circuit(x, w):
...     qml.AngleEmbedding(x, wires=range(2), rotation="Y")
...     qml.StronglyEntanglingLayers(w, wires=range(2))
...     return [qml.expval(qml.Z(i)) for i in range(2)]
"""

from .workflow import QNode, cuda_graph, device, qnode
from .devices import TensorNetworkDevice
from .gradients import AdjointTN, JacobianProductCalculator, Launcher, ParameterShift
from .interfaces.torch import ExecuteTapes, execute
from .layers import ArgMax, ArgMaxQLayer, ExpQLayer, GraphQLayer, QLayer, TorchLayer

__version__ = "0.1.0"

__all__ = [
    "device",
    "qnode",
    "QNode",
    "execute",
    "cuda_graph",
    "ExecuteTapes",
    "TensorNetworkDevice",
    "JacobianProductCalculator",
    "AdjointTN",
    "ParameterShift",
    "Launcher",
    "ExpQLayer",
    "GraphQLayer",
    "QLayer",
    "ArgMax",
    "ArgMaxQLayer",
    "TorchLayer",
    "__version__",
]
