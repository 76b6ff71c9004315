"""The one exception a live run raises for a problem the user can act on."""

from __future__ import annotations


class LiveError(ValueError):
    """A live run cannot start or did not finish; the message is one sentence saying
    what is wrong and what to do. ``run_id`` names the run when one had started."""

    def __init__(self, message: str, *, run_id: str | None = None) -> None:
        super().__init__(" ".join(message.split()))
        self.run_id = run_id


NOT_ROOT = "live runs need root to create network namespaces; run as root or use --backend sim"
NO_IPERF3 = "iperf3 is not installed, and live runs use it to generate traffic; install it: apt-get install iperf3"
