"""fairlab: how fairly transport flows share a bottleneck, and why."""

__version__ = "0.1.0"
