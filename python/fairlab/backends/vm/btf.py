"""Where a guest kernel keeps the fields the queue trace reads, from its own BTF.

The vm backend's queue trace (docs/queue-trace.md) reads each packet's ports and
sequence number, its length and the queue's backlog with a kprobe on the
bottleneck qdisc's enqueue function. Linux 6.1's kprobe events cannot name struct
fields (that came with 6.6's BTF arguments), only byte offsets, and the offsets
depend on the kernel's configuration. Every kernel built with
``CONFIG_DEBUG_INFO_BTF`` (Debian's, Ubuntu's, Fedora's) carries the layout of its
own types in a ``.BTF`` ELF section (the format: Documentation/bpf/btf.rst); this
module reads the few offsets it needs from there, so the trace works on the
shipped kernel and on one a user brings (``--kernel``) alike.
"""

from __future__ import annotations

import json
import struct
from dataclasses import asdict, dataclass
from pathlib import Path

_MAGIC = 0xEB9F

# BTF kinds (include/uapi/linux/btf.h) and the bytes each appends to its 12-byte type
# record, by its vlen.
_STRUCT, _UNION = 4, 5
_TYPEDEF, _VOLATILE, _CONST, _RESTRICT, _TYPE_TAG = 8, 9, 10, 11, 18
_EXTRA = {
    1: lambda vlen: 4,        # INT
    3: lambda vlen: 12,       # ARRAY
    4: lambda vlen: 12 * vlen,  # STRUCT
    5: lambda vlen: 12 * vlen,  # UNION
    6: lambda vlen: 8 * vlen,   # ENUM
    13: lambda vlen: 8 * vlen,  # FUNC_PROTO
    14: lambda vlen: 4,       # VAR
    15: lambda vlen: 12 * vlen,  # DATASEC
    17: lambda vlen: 4,       # DECL_TAG
    19: lambda vlen: 12 * vlen,  # ENUM64
}
_KNOWN_KINDS = set(range(1, 20))


class BtfError(ValueError):
    """The kernel image has no usable BTF; the message names the file and what is missing."""


@dataclass(frozen=True)
class QueueTraceLayout:
    """Byte offsets the queue trace's kprobe reads: ``skb->data``, ``skb->len`` and
    ``sch->qstats.backlog`` (a qdisc's bytes queued)."""

    skb_data: int
    skb_len: int
    qdisc_backlog: int


class _Btf:
    def __init__(self, raw: bytes, where: str):
        if len(raw) < 24:
            raise BtfError(f"{where}: the .BTF section is too short to hold a header")
        magic, _version, _flags, hdr_len, type_off, type_len, str_off, str_len = struct.unpack_from("<HBBIIIII", raw)
        if magic != _MAGIC:
            raise BtfError(f"{where}: the .BTF section does not start with BTF's magic (0xeB9F, little-endian)")
        self.where = where
        self.strings = raw[hdr_len + str_off: hdr_len + str_off + str_len]
        types = raw[hdr_len + type_off: hdr_len + type_off + type_len]
        self.types: list[tuple[int, int, int, int, int]] = [(0, 0, 0, 0, 0)]  # id 0 is void
        self.by_name: dict[tuple[int, str], int] = {}
        pos = 0
        while pos + 12 <= len(types):
            name_off, info, size_or_type = struct.unpack_from("<III", types, pos)
            kind = (info >> 24) & 0x1F
            vlen = info & 0xFFFF
            if kind not in _KNOWN_KINDS:
                raise BtfError(f"{where}: BTF type kind {kind} is not one this reader knows (1-19)")
            tid = len(self.types)
            self.types.append((kind, vlen, info >> 31, size_or_type, pos + 12))
            if kind in (_STRUCT, _UNION) and name_off:
                self.by_name.setdefault((kind, self._str(name_off)), tid)
            pos += 12 + _EXTRA.get(kind, lambda v: 0)(vlen)
        self.raw_types = types

    def _str(self, off: int) -> str:
        end = self.strings.index(b"\0", off)
        return self.strings[off:end].decode("ascii", "replace")

    def _resolve(self, tid: int) -> int:
        """Through typedefs and qualifiers to the type they name."""
        while self.types[tid][0] in (_TYPEDEF, _VOLATILE, _CONST, _RESTRICT, _TYPE_TAG):
            tid = self.types[tid][3]
        return tid

    def _members(self, tid: int):
        kind, vlen, kflag, _size, at = self.types[tid]
        for k in range(vlen):
            name_off, mtype, offset = struct.unpack_from("<III", self.raw_types, at + 12 * k)
            bits = offset & 0xFFFFFF if kflag else offset
            yield (self._str(name_off) if name_off else ""), mtype, bits

    def member_offset(self, struct_name: str, member: str) -> int:
        """Byte offset of ``member`` in ``struct struct_name``, looking into anonymous
        structs and unions as C does."""
        tid = self.by_name.get((_STRUCT, struct_name))
        if tid is None:
            raise BtfError(f"{self.where}: the kernel's BTF has no struct {struct_name}")
        found = self._find(tid, member)
        if found is None:
            raise BtfError(f"{self.where}: struct {struct_name} has no member {member!r} in the kernel's BTF")
        if found % 8:
            raise BtfError(f"{self.where}: {struct_name}.{member} is a bit-field")
        return found // 8

    def _find(self, tid: int, member: str) -> int | None:
        for name, mtype, bits in self._members(tid):
            if name == member:
                return bits
            if not name:
                inner = self._resolve(mtype)
                if self.types[inner][0] in (_STRUCT, _UNION):
                    sub = self._find(inner, member)
                    if sub is not None:
                        return bits + sub
        return None


def _btf_section(kernel: Path) -> bytes:
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    try:
        with kernel.open("rb") as fh:
            elf = ELFFile(fh)
            sec = elf.get_section_by_name(".BTF")
            if sec is None:
                raise BtfError(f"{kernel}: the kernel has no .BTF section (built without CONFIG_DEBUG_INFO_BTF), so the "
                               "queue trace cannot find its fields; use a kernel built with BTF, or --backend sim")
            return sec.data()
    except ELFError:
        raise BtfError(f"{kernel}: not an ELF kernel image (the vm backend boots an uncompressed vmlinux)") from None


def queue_trace_layout(kernel: Path, cache: Path | None = None) -> QueueTraceLayout:
    """The offsets of ``kernel`` (an uncompressed vmlinux), read from its BTF; with
    ``cache`` (a JSON file) they are read once per kernel."""
    if cache is not None and cache.exists():
        try:
            return QueueTraceLayout(**json.loads(cache.read_text()))
        except (ValueError, TypeError):
            pass  # an unreadable cache is rebuilt below
    btf = _Btf(_btf_section(kernel), str(kernel))
    layout = QueueTraceLayout(
        skb_data=btf.member_offset("sk_buff", "data"),
        skb_len=btf.member_offset("sk_buff", "len"),
        qdisc_backlog=btf.member_offset("Qdisc", "qstats") + btf.member_offset("gnet_stats_queue", "backlog"),
    )
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps(asdict(layout)))
    return layout
