"""Holding the simulator against the real kernel: the validation grid (`grid`) and
its committed kernel results (``data/vm-grid.csv``), run by `fairlab validate`."""
