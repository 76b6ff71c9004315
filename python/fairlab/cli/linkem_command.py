"""The `linkem` command a fairlab install puts on PATH: it runs the linkem binary the
wheel carries (or, in a source checkout, cargo's build), so `linkem --config …` as
docs/linkem.md shows it works after `pip install`. The process is replaced by linkem
(exec), so signals and the exit code are linkem's own."""

from __future__ import annotations

import os
import sys


def main() -> None:
    from ..backends.live.linkem_link import find_linkem

    binary, how = find_linkem(search_path=False)
    if binary is None:
        print(f"linkem: {how}", file=sys.stderr)
        sys.exit(1)
    os.execv(binary, [binary, *sys.argv[1:]])
