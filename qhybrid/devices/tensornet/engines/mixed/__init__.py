"""Mixed-state engine for circuits with channels: the density matrix as ket and bra wires of a state-vector-style
program (``evolve``), channels as superoperators (``channels``), unitaries applied to both sides, measurements read
off the density matrix (``measure``). ``program.MixedProgram`` compiles one structure; ``run.run_mixed`` is the
simulator's hook.
"""

from .channels import CHANNEL_NAMES, PAULI_MIXTURES, is_channel, superoperator
from .run import has_channels, run_mixed
from .trajectories import NOISE_MODES, NoiseDraws, check_noise_options, trajectory_fields

__all__ = ["CHANNEL_NAMES", "PAULI_MIXTURES", "is_channel", "superoperator", "has_channels", "run_mixed", "NOISE_MODES", "NoiseDraws",
           "check_noise_options", "trajectory_fields"]
