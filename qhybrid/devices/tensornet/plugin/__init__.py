"""The PennyLane face of qhybrid.tensornet: execution config, preprocessing, derivatives, conversions."""
