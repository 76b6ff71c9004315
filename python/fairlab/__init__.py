"""fairlab: how fairly transport flows share a bottleneck, and why."""
