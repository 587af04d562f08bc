"""The tensornet device's simulation engines: ``statevector`` (narrow circuits as a compiled state-vector
program with its adjoint) and ``network`` (structure -> network -> plan -> contraction through a backend).
"""
