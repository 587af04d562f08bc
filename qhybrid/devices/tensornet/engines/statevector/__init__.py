"""State-vector engine: the plan of a structure compiled into a few large tensor ops (``program``), the
kernels that run and un-apply them (``kernels``), runs of diagonal gates as one phase multiply
(``diagonal``), the one-node adjoint Function (``adjoint``), the Z-word readout (``zwords``), gate blocks
(``blocks``) and allocator settings (``allocator``).
"""
