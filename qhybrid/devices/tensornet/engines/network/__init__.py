"""Network engine: tensor networks of a structure (``network``), contraction paths within a time budget
(``pathfind``, ``plan``) and the programs that contract them through a backend (``programs``).
"""
