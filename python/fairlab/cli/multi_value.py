"""Options that take several values (`--calibration`, `--baseline`, `--label`, `--set`)
are ordinary repeatable click options: `--calibration c1.json --calibration c2.json`.
Click takes the token after such an option as its value whatever it looks like, so
values that start with "-" work (`--label -x`).

The older spelling `--calibration c1.json c2.json` would now make c2.json an analysed
file, a silent change of meaning. This check refuses a positional argument that
directly follows a repeatable option's value, before click parses anything. It only
reads the argument list (the option table comes from the click command itself).
"""

from __future__ import annotations

from typing import Any

from .common import UsageError


def _resolve(cli: Any, args: list[str]) -> tuple[Any, list[str]]:
    """The (sub)command ``args`` invoke, and the arguments after its name. Duck-typed:
    typer may bring its own copy of click, so isinstance checks against `click` fail."""
    cmd, i = cli, 0
    while isinstance(getattr(cmd, "commands", None), dict) and i < len(args):
        tok = args[i]
        i += 1
        if tok.startswith("-"):
            continue
        sub = cmd.commands.get(tok)
        if sub is None:
            return cmd, []  # click reports the unknown command itself
        cmd = sub
    return cmd, args[i:]


def refuse_values_after_repeatable_option(cli: Any, args: list[str]) -> None:
    """Raise `UsageError` for `--opt A B` where --opt is repeatable and B is positional."""
    cmd, rest = _resolve(cli, args)
    if isinstance(getattr(cmd, "commands", None), dict):
        return  # a group without a (known) subcommand: click explains
    takes_value: dict[str, bool] = {}  # option name -> repeatable
    for p in cmd.params:
        if getattr(p, "param_type_name", None) == "option" and not p.is_flag and not p.count:
            for name in p.opts:
                takes_value[name] = p.multiple
    after_value_of: str | None = None  # the repeatable option whose value was the last token
    value = ""
    i = 0
    while i < len(rest):
        tok = rest[i]
        if tok == "--":
            return
        name = tok.split("=", 1)[0]
        if tok.startswith("-") and name in takes_value:
            inline = "=" in tok
            value = tok.split("=", 1)[1] if inline else (rest[i + 1] if i + 1 < len(rest) else "")
            after_value_of = name if takes_value[name] else None
            i += 1 if inline else 2
            continue
        if not tok.startswith("-") and after_value_of is not None:
            raise UsageError(
                f"`{after_value_of} {value}` is followed by {tok!r}, which would be read as a positional "
                f"argument, not as another {after_value_of} value: repeat the option for each value "
                f"({after_value_of} {value} {after_value_of} {tok}) and put positional arguments before the options"
            )
        after_value_of = None
        i += 1
