"""Light-cone engine for wide circuits: each measured Pauli term reduced to its reverse light cone
(``cones``), cones that are the same circuit up to a relabelling of wires grouped into classes with one
sub-tape each (``classes``), every class one stacked program over its members' parameters (``program``,
``values``), equal parameter rows run once with exact gradients (``shared``).
"""
