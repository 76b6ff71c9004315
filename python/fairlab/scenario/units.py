"""Human units → integers, parsed here and nowhere else (DESIGN.md, "Units").

Rates become bits/s, durations nanoseconds, sizes bytes. Every parser raises
`UnitError` with a sentence that shows the allowed forms; the schema adds the field
name and file.

Conventions (written down because tools disagree):
- Rates follow networking papers: ``Mbit``, ``Mbit/s``, ``Mb/s`` and ``Mbps`` are all
  megaBITS per second (10^6). A capital ``B`` means bytes: ``MB/s`` and ``MBps`` are
  megabytes per second. (Linux ``tc`` reads ``mbps`` as megabytes; fairlab does not
  accept tc's lower-case byte spelling to avoid that trap — write ``MB/s``.)
- Size prefixes are decimal (KB = 1000 B, MB = 10^6 B) unless binary is spelled out
  (KiB, MiB, GiB).
"""

from __future__ import annotations

import re

_NUM = r"(?P<num>[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)"
#: Rate prefixes, case-exact as SI writes them (``K`` is tolerated for kilo): a
#: lower-case ``m`` is milli, and tc reads ``mbps`` as megabytes, so neither is taken.
_PREFIX = {"": 1, "k": 10**3, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}

#: Largest values accepted. No link carries more than 10 Tbit/s (ten times IEEE
#: 802.3df's 800 Gbit/s); a duration beyond 10^18 ns (31.7 years) or a size beyond
#: 2^53 bytes (9 PB) is a typo, and larger numbers would overflow the engine's u64
#: nanoseconds or lose integer precision in a float.
MAX_RATE_BPS = 10**13
MAX_DURATION_NS = 10**18
MAX_SIZE_BYTES = 2**53


class UnitError(ValueError):
    """A value is not in an accepted unit form; the message lists the forms."""


RATE_FORMS = "a number and a rate unit: bit/s, kbit, Mbit, Gbit (also Mbit/s, Mb/s, Mbps), or bytes per second as kB/s, MB/s, GB/s — e.g. '100Mbit', '10Gbit'"
DURATION_FORMS = "a number and a time unit: ns, us, ms, s, min or h — e.g. '25ms', '300s'"
SIZE_FORMS = "a number and a size unit: B, KB, MB, GB (decimal) or KiB, MiB, GiB — e.g. '64KB', '1.5MB'"
BUFFER_FORMS = ("a percentage of the BDP ('100%bdp'), a multiple of it ('1bdp', '0.2 BDP'), "
                "a packet count ('1000p') or a size ('1.5MB', '64KiB')")


def _text(value: object, forms: str) -> str:
    if isinstance(value, bool) or not isinstance(value, str):
        raise UnitError(f"{value!r} has no unit; write {forms}")
    return value.strip()


def parse_rate(value: object) -> int:
    """'100Mbit' → 100_000_000 (bits/s)."""
    s = _text(value, RATE_FORMS)
    m = re.fullmatch(_NUM + r"\s*(?P<prefix>[kKMGT]?)(?P<unit>bit/s|bit|bps|b/s|Bps|B/s)", s)
    if not m:
        if re.fullmatch(_NUM + r"\s*[mgt](bit/s|bit|bps|b/s|Bps|B/s)", s):
            raise UnitError(f"{s!r} is not a rate: prefixes are case-exact (a lower-case m is milli, and tc reads "
                            f"'mbps' as megabytes), so write e.g. 'Mbit' for megabits or 'MB/s' for megabytes")
        raise UnitError(f"{s!r} is not a rate; write {RATE_FORMS}")
    factor = _PREFIX[m["prefix"]]
    bits = 8 if m["unit"] in ("Bps", "B/s") else 1
    rate = float(m["num"]) * factor * bits
    if rate <= 0:
        raise UnitError(f"{s!r}: a rate must be greater than zero")
    if not rate <= MAX_RATE_BPS:
        raise UnitError(f"{s!r} is more than any link carries (allowed: up to 10Tbit)")
    if round(rate) < 1:
        raise UnitError(f"{s!r} rounds to 0 bit/s; a rate must be at least 1 bit/s")
    return int(round(rate))


_DURATION_UNITS = {"ns": 1, "us": 10**3, "µs": 10**3, "ms": 10**6, "s": 10**9, "min": 60 * 10**9, "h": 3600 * 10**9}
_DURATION = re.compile(_NUM + r"\s*(?P<unit>" + "|".join(sorted(_DURATION_UNITS, key=len, reverse=True)) + ")")


def parse_duration(value: object) -> int:
    """'25ms' → 25_000_000 (nanoseconds). Zero is allowed; negative is not."""
    s = _text(value, DURATION_FORMS)
    m = _DURATION.fullmatch(s)
    if not m:
        if s.startswith("-") and _DURATION.fullmatch(s[1:].lstrip()):
            raise UnitError(f"{s!r} is negative; a duration must be 0 or more")
        raise UnitError(f"{s!r} is not a duration; write {DURATION_FORMS}")
    ns = float(m["num"]) * _DURATION_UNITS[m["unit"]]
    if not ns <= MAX_DURATION_NS:
        raise UnitError(f"{s!r} is longer than any run (allowed: up to 1e18 ns, about 31 years)")
    return int(round(ns))


_SIZE_UNITS = {"B": 1, "KB": 10**3, "kB": 10**3, "MB": 10**6, "GB": 10**9, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}
_SIZE = re.compile(_NUM + r"\s*(?P<unit>B|KB|kB|MB|GB|KiB|MiB|GiB)")


def parse_size(value: object) -> int:
    """'1.5MB' → 1_500_000 (bytes). A bare integer is taken as bytes."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise UnitError(f"{value}: a size cannot be negative")
        if value > MAX_SIZE_BYTES:
            raise UnitError(f"{value} bytes is larger than any buffer or transfer (allowed: up to 2^53 bytes)")
        return value
    s = _text(value, SIZE_FORMS)
    m = _SIZE.fullmatch(s)
    if not m:
        raise UnitError(f"{s!r} is not a size; write {SIZE_FORMS}")
    n = float(m["num"]) * _SIZE_UNITS[m["unit"]]
    if not n <= MAX_SIZE_BYTES:
        raise UnitError(f"{s!r} is larger than any buffer or transfer (allowed: up to 2^53 bytes)")
    return int(round(n))


# A share of the BDP, as a percentage ('100%bdp') or, as the papers and the
# validation grid's cell names write it, a multiple ('1 BDP', '0.2bdp', '2xBDP').
_BUFFER_BDP = re.compile(_NUM + r"\s*(?:(?P<pct>%)|x|×)?\s*bdp", flags=re.IGNORECASE)
_BUFFER_PACKETS = re.compile(r"(?P<num>[0-9]+)\s*(p|pkts?|packets?)")


def parse_buffer(value: object) -> tuple[str, float]:
    """A buffer: ('bdp', fraction) | ('packets', n) | ('bytes', n)."""
    s = _text(value, BUFFER_FORMS)
    # No form takes a sign, so '-5%bdp' would be called "not a buffer size" although
    # its form is right; name the sign instead, as parse_duration does.
    if s.startswith("-") and any(form.fullmatch(s[1:].lstrip())
                                 for form in (_BUFFER_BDP, _BUFFER_PACKETS, _SIZE)):
        raise UnitError(f"{s!r} is negative; a buffer must be larger than zero, written as {BUFFER_FORMS}")
    m = _BUFFER_BDP.fullmatch(s)
    if m:
        fraction = float(m["num"]) / (100.0 if m["pct"] else 1.0)
        if fraction <= 0:
            raise UnitError(f"{s!r}: the buffer must be larger than 0% of the BDP")
        if not fraction <= 1e4:
            raise UnitError(f"{s!r}: allowed buffers are up to 1000000%bdp (10000bdp)")
        return ("bdp", fraction)
    m = _BUFFER_PACKETS.fullmatch(s)
    if m:
        n = int(m["num"])
        if n < 1:
            raise UnitError(f"{s!r}: the buffer must hold at least one packet")
        if n > 10**9:
            raise UnitError(f"{s!r}: allowed buffers are up to 1000000000 packets")
        return ("packets", float(n))
    try:
        n = parse_size(s)
    except UnitError as exc:
        if "larger than" in str(exc):
            raise
        raise UnitError(f"{s!r} is not a buffer size; write {BUFFER_FORMS}") from None
    if n < 1:
        raise UnitError(f"{s!r}: the buffer must hold at least one byte")
    return ("bytes", float(n))
