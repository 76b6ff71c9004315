"""Fixtures shared by the test modules."""

from __future__ import annotations

import shutil

import pytest


@pytest.fixture(scope="module")
def vm_ready():
    """The vm backend's guest image (built on first use); fails, never skips, when
    QEMU is missing: `make test` installs it."""
    if shutil.which("qemu-system-x86_64") is None:
        pytest.fail("QEMU is not installed; `make test` installs it (apt-get install qemu-system-x86)")
    from fairlab.backends.vm.image import find

    return find()
