"""The `fairlab` command line (typer + rich). Each command lives in its own module.

Bad input never produces a traceback: every error type fairlab raises for a user's
mistake is caught in `main` and printed as one sentence, with exit code 2.
"""

from __future__ import annotations

import sys
from importlib import import_module

import typer

#: Command name -> (module of this package, function). `main` imports only the module
#: of the command being run: importing every command module pulled the ingest, live
#: and vm backends (and more) into every start of `fairlab run`.
COMMANDS: dict[str, tuple[str, str]] = {
    "analyze": ("analyze_cmd", "analyze"),
    "run": ("run_cmd", "run"),
    "plan": ("plan_cmd", "plan"),
    "compare": ("compare_cmd", "compare"),
    "validate": ("validate_cmd", "validate"),
    "reproduce": ("campaign_cmds", "reproduce"),
    "report": ("campaign_cmds", "report"),
    "query": ("campaign_cmds", "query"),
}
#: Command groups: name -> (module, its Typer sub-app).
GROUPS: dict[str, tuple[str, str]] = {
    "list": ("list_cmd", "app"),
    "live": ("live_cmd", "app"),
    "vm": ("vm_cmd", "app"),
}


def _group() -> None:
    """How fairly do transport flows share a bottleneck — and why?"""


def build_app(only: str | None = None) -> typer.Typer:
    """The `fairlab` Typer app with every command, or with just the command or group
    ``only`` (what `main` builds to run one command)."""
    app = typer.Typer(
        name="fairlab",
        help="How fairly do transport flows share a bottleneck — and why?",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )
    for name, (module, attr) in COMMANDS.items():
        if only in (None, name):
            app.command(name)(getattr(import_module(f".{module}", __name__), attr))
    for name, (module, attr) in GROUPS.items():
        if only in (None, name):
            app.add_typer(getattr(import_module(f".{module}", __name__), attr), name=name)
    if only in COMMANDS:
        # With one command and no callback Typer runs that command as the whole
        # program (`fairlab run x.toml` would read "run" as the scenario); a callback
        # keeps `fairlab NAME ...` a command of a group, as with every command loaded.
        app.callback()(_group)
    return app


def __getattr__(name: str):  # type: ignore[no-untyped-def]
    # `fairlab.cli.app`, the whole app (tests, `typer.testing.CliRunner`), built on
    # first use so importing this package stays cheap.
    if name == "app":
        globals()["app"] = value = build_app()
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: Options that take one or more values (`--calibration a.json b.json`). Click options
#: take one value each, so the argument list is rewritten to repeat the flag.
MULTI_VALUE_OPTIONS = ("--calibration", "--baseline", "--label")


def expand_multi_value_options(argv: list[str]) -> list[str]:
    """`--calibration a b --json` → `--calibration a --calibration b --json`."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        tok = argv[i]
        out.append(tok)
        i += 1
        if tok in MULTI_VALUE_OPTIONS:
            first = True
            while i < len(argv) and not argv[i].startswith("-"):
                if not first:
                    out.append(tok)
                out.append(argv[i])
                first = False
                i += 1
    return out


def main() -> None:
    """Console entry point."""
    argv = expand_multi_value_options(sys.argv[1:])
    only = argv[0] if argv and (argv[0] in COMMANDS or argv[0] in GROUPS) else None
    try:
        build_app(only)(args=argv, standalone_mode=True)
    except KeyboardInterrupt:
        from .common import err_console

        err_console.print("interrupted")
        sys.exit(130)
    except Exception as exc:
        # Imported here, not at the top: the error types live in modules that import
        # pandas, which `fairlab list` or `--help` never need.
        from rich.markup import escape

        from .common import USER_ERRORS, err_console

        if not isinstance(exc, USER_ERRORS):
            raise
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        sys.exit(2)
