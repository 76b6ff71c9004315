"""The one exception every importer raises for input it will not read."""

from __future__ import annotations

from collections.abc import Iterable


class IngestError(ValueError):
    """A measurement file was refused.

    The message is ONE sentence: the file, where (line or field) if that helps, what
    is wrong, and where relevant the allowed values — e.g.
    ``"out.json: field 'intervals[3].streams[0].bits_per_second' must be a number, not 'abc'."``
    The parts are also kept as attributes for programs: ``source``, ``line``,
    ``field``, ``allowed``.
    """

    def __init__(
        self,
        source: str,
        problem: str,
        *,
        line: int | None = None,
        field: str | None = None,
        allowed: Iterable[str] | None = None,
    ) -> None:
        self.source = source
        self.problem = problem
        self.line = line
        self.field = field
        self.allowed = list(allowed) if allowed is not None else None
        where = ""
        if line is not None:
            where += f" line {line}"
        if field is not None:
            where += f"{',' if line is not None else ''} field {field!r}"
        msg = f"{source}:{where}{':' if where else ''} {problem.rstrip('.')}"
        if self.allowed:
            msg += f" (allowed: {', '.join(self.allowed)})"
        # One sentence, one line: a newline inside quoted tool output would break it.
        msg = " ".join(msg.split()) + "."
        super().__init__(msg)
