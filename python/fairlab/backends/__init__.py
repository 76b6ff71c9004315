"""Backends: turn a `Scenario` into a `Trace`.

- ``live``: real Linux TCP in network namespaces with iperf3 (`fairlab.backends.live`).
"""
