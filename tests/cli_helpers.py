"""The fairlab command line as a user meets it: a fresh interpreter running the
console entry point (`fairlab = fairlab.cli:main`), so exit codes, stdout and stderr
are exactly what a shell would see."""

from __future__ import annotations

import subprocess
import sys

#: argv prefix that runs `fairlab` from this interpreter's environment.
FAIRLAB_CLI = [sys.executable, "-c", "from fairlab.cli import main; main()"]


def fairlab(*args: object, **kwargs) -> subprocess.CompletedProcess:
    """Run `fairlab ARGS...`, capturing text output."""
    return subprocess.run([*FAIRLAB_CLI, *map(str, args)], capture_output=True, text=True, **kwargs)
