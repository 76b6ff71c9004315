"""Shared pieces of the hostile-input fuzz suite (tests/test_fuzz_*.py).

Two hypothesis profiles:

- ``fuzz-quick`` (default, part of ``make test``): a few hundred inputs in total,
  well under a minute on two cores.
- ``fuzz-long`` (``FAIRLAB_FUZZ=long``, run by ``make validate``): enough examples per
  test that the suite tries more than 10,000 inputs. With ``FAIRLAB_FUZZ_REPORT=PATH``
  each test appends ``name inputs`` to PATH, so the total can be recorded
  (docs/ingest.md, "Robustness").

The oracle every fuzz test shares (docs/cli.md): an input is either read, or refused
with ONE line naming the source; anything else — another exception type, a
multi-line message, a call that runs past `TIME_LIMIT_S` (a hang) — fails the test.
"""

from __future__ import annotations

import os
import signal
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

from hypothesis import HealthCheck, settings

LONG = os.environ.get("FAIRLAB_FUZZ") == "long"
#: Examples per fuzz test in each profile.
EXAMPLES = 1500 if LONG else 40
#: One call that takes longer than this counts as a hang.
TIME_LIMIT_S = 20

settings.register_profile("fuzz", max_examples=EXAMPLES, deadline=None, database=None, derandomize=not LONG,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                 HealthCheck.filter_too_much, HealthCheck.large_base_example])
FUZZ = settings.get_profile("fuzz")
#: For tests whose every input runs a whole command (~0.5 s each).
FUZZ_SLOW = settings(FUZZ, max_examples=1000 if LONG else 12)

#: Inputs tried per test in this process (reported at exit with FAIRLAB_FUZZ_REPORT).
TRIED: Counter[str] = Counter()


class Hang(Exception):
    """A call ran past TIME_LIMIT_S."""


@contextmanager
def time_limit(seconds: int = TIME_LIMIT_S):
    def on_alarm(signum, frame):  # noqa: ARG001
        raise Hang(f"no answer within {seconds} s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def one_sentence(msg: str, source: str | None = None) -> None:
    """The refusal rule: one line, naming the source when there is one."""
    assert "\n" not in msg, msg
    assert "Traceback" not in msg, msg
    if source is not None:
        assert msg.startswith(source), (source, msg)


def count(name: str) -> None:
    TRIED[name] += 1


def _report() -> None:
    path = os.environ.get("FAIRLAB_FUZZ_REPORT")
    if path and TRIED:
        with Path(path).open("a") as fh:
            for name, n in sorted(TRIED.items()):
                fh.write(f"{name} {n}\n")


import atexit  # noqa: E402

atexit.register(_report)
