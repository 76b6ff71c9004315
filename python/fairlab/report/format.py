"""Numbers as a reader sees them: the one SI formatter for rates, sizes and times.

Figures use `matplotlib.ticker.EngFormatter` on their axes (`style.rate_axis`); text
(tables, captions, the CLI) uses `fmt_rate`, so a rate has the same prefix
everywhere: the largest SI prefix not bigger than the value, as iperf prints it.
"""

from __future__ import annotations

import math

from ..metrics._common import fmt_num

__all__ = ["fmt_bytes", "fmt_pct", "fmt_rate", "fmt_rate_pm", "fmt_seconds", "fmt_num", "rate_unit"]

_RATE_PREFIXES = ((1e12, "Tbit/s"), (1e9, "Gbit/s"), (1e6, "Mbit/s"), (1e3, "kbit/s"))


def rate_unit(bps: float) -> tuple[float, str]:
    """The SI prefix iperf would print ``bps`` with: (factor, unit), e.g.
    ``rate_unit(2.5e7) == (1e6, "Mbit/s")``."""
    for factor, unit in _RATE_PREFIXES:
        if abs(bps) >= factor:
            return factor, unit
    return 1.0, "bit/s"


def fmt_rate(bps: float | None, dp: int = 2) -> str:
    """Bits/s with an SI prefix: ``fmt_rate(9.72e7) == "97.20 Mbit/s"``; None → "—"."""
    if bps is None or (isinstance(bps, float) and math.isnan(bps)):
        return "—"
    factor, unit = rate_unit(bps)
    return f"{bps:.0f} bit/s" if factor == 1.0 else f"{bps / factor:.{dp}f} {unit}"


def fmt_rate_pm(bps: float | None, std: float | None, dp: int = 2) -> str:
    """"mean ± std unit" with both in the mean's unit: "9.72 ± 0.20 Mbit/s"."""
    if bps is None or std is None:
        return fmt_rate(bps, dp)
    factor, unit = rate_unit(bps)
    return f"{bps / factor:.{dp}f} ± {std / factor:.{dp}f} {unit}"


def fmt_bytes(n: float | None) -> str:
    """A size in decimal SI units, as the scenario files write them: 1250000 → "1.25 MB"."""
    if n is None:
        return "—"
    for factor, unit in ((1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
        if abs(n) >= factor:
            return f"{n / factor:.3g} {unit}"
    return f"{n:.0f} B"


def fmt_seconds(s: float | None) -> str:
    """Seconds, or milliseconds below one second: 0.025 → "25 ms", 300 → "300 s"."""
    if s is None:
        return "—"
    if 0 < abs(s) < 1:
        return f"{s * 1e3:.4g} ms"
    return f"{s:.4g} s"


def fmt_pct(fraction: float | None, dp: int = 0) -> str:
    """A fraction as a percentage: 0.834 → "83%"."""
    return "—" if fraction is None else f"{100 * fraction:.{dp}f}%"
