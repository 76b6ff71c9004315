"""The live backend: a scenario on real Linux TCP in network namespaces, with iperf3.

Public API:

- `run_live(scenario, *, seed, run_index=0, progress=None, run_dir=None, emulation="auto") -> Trace`
- `preflight(scenario)` — check without side effects; returns the emulation path
- `probe()` — what this machine can do (`fairlab live doctor` prints it)
- `cleanup(run_id=None)` — remove live-run leftovers by name prefix only
- `LiveError` — every problem a user can act on, as one sentence

See docs/live.md.
"""

from .capabilities import Capabilities, probe
from .cleanup import CleanupReport, cleanup
from .errors import LiveError
from .runner import LiveProgress, PathChoice, choose_path, preflight, run_live

__all__ = ["Capabilities", "CleanupReport", "LiveError", "LiveProgress", "PathChoice", "choose_path", "cleanup",
           "preflight", "probe", "run_live"]
