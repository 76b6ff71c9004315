"""A reproducible cpio archive (the kernel's "newc" initramfs format).

The guest's clock is its instruction count, so two boots from initramfs images that
differ in a single byte — an mtime, an inode number, the order of entries — unpack
with different instruction counts and shift every later event. This writer therefore
emits entries in sorted path order with inode numbers counted from 1, owner 0:0 and
mtime 0, so the same files always give the same bytes. Format: the kernel's
Documentation/driver-api/early-userspace/buffer-format.rst ("newc", magic 070701).
"""

from __future__ import annotations

import io
import stat
from dataclasses import dataclass

_MAGIC = b"070701"
_TRAILER = "TRAILER!!!"


@dataclass(frozen=True)
class Entry:
    """One archive member: a directory, a regular file or a symlink."""

    path: str  # relative, no leading "/"
    mode: int  # full st_mode (type bits included)
    data: bytes = b""  # file contents, or the symlink's target


def directory(path: str, perm: int = 0o755) -> Entry:
    return Entry(path, stat.S_IFDIR | perm)


def file(path: str, data: bytes, perm: int = 0o644) -> Entry:
    return Entry(path, stat.S_IFREG | perm, data)


def symlink(path: str, target: str) -> Entry:
    return Entry(path, stat.S_IFLNK | 0o777, target.encode())


def _pad4(n: int) -> bytes:
    return b"\0" * ((4 - n % 4) % 4)


def _header(ino: int, mode: int, nlink: int, size: int, namesize: int) -> bytes:
    fields = [ino, mode, 0, 0, nlink, 0, size, 0, 0, 0, 0, namesize, 0]  # uid gid mtime devs check = 0
    return _MAGIC + b"".join(b"%08X" % v for v in fields)


def archive(entries: list[Entry]) -> bytes:
    """The archive bytes of ``entries``: parents before children, sorted, canonical."""
    seen: dict[str, Entry] = {}
    for e in entries:
        p = e.path.strip("/")
        if not p or ".." in p.split("/"):
            raise ValueError(f"cpio entry path {e.path!r} must be relative and stay inside the archive")
        if p in seen and seen[p] != Entry(p, e.mode, e.data):
            raise ValueError(f"cpio entry {p!r} given twice with different contents")
        seen[p] = Entry(p, e.mode, e.data)
    # Every parent directory exists before its children.
    for p in list(seen):
        parts = p.split("/")
        for i in range(1, len(parts)):
            parent = "/".join(parts[:i])
            seen.setdefault(parent, directory(parent))
    out = io.BytesIO()
    for ino, p in enumerate(sorted(seen), start=1):
        e = seen[p]
        name = p.encode() + b"\0"
        nlink = 2 if stat.S_ISDIR(e.mode) else 1
        head = _header(ino, e.mode, nlink, len(e.data), len(name))
        out.write(head + name + _pad4(len(head) + len(name)))
        out.write(e.data + _pad4(len(e.data)))
    name = _TRAILER.encode() + b"\0"
    head = _header(0, 0, 1, 0, len(name))
    out.write(head + name + _pad4(len(head) + len(name)))
    return out.getvalue()
