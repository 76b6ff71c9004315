"""The `fairlab` command line (typer + rich). Each command lives in its own module.

Bad input never produces a traceback: every error type fairlab raises for a user's
mistake is caught in `main` and printed as one sentence, with exit code 2.
"""

from __future__ import annotations

import sys
from importlib import import_module
from typing import Any

import typer

from .. import __version__

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


def _print_version(value: bool) -> None:
    if value:
        print(f"fairlab {__version__}")
        raise typer.Exit()


def _root(
    version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True, help="print fairlab's version and exit"),
) -> None:
    """How fairly do transport flows share a bottleneck — and why?"""


class _RootGroup(typer.core.TyperGroup):
    """The root command, with its help tidied where every caller runs it.

    Typer makes a new click command from the app on each use (`main` once, each
    `typer.testing.CliRunner().invoke(app, ...)` again) and adds the completion options
    after making it, so the one place that sees the finished command tree on both
    paths is its `main`. Tidied only in `fairlab.cli.main`, the app invoked directly
    still printed "--json <bool>"; tidied here, both print the same help."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        flags_show_no_value_type(self)
        summaries_flow(self)
        return super().main(*args, **kwargs)


def build_app(only: str | None = None) -> typer.Typer:
    """The `fairlab` Typer app with every command, or with just the command or group
    ``only`` (what `main` builds to run one command). The root callback keeps
    `fairlab NAME ...` a command of a group even when only NAME is loaded."""
    app = typer.Typer(
        name="fairlab",
        cls=_RootGroup,
        help="How fairly do transport flows share a bottleneck — and why?",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
    )
    for name, (module, attr) in COMMANDS.items():
        if only in (None, name):
            app.command(name)(getattr(import_module(f".{module}", __name__), attr))
    for name, (module, attr) in GROUPS.items():
        if only in (None, name):
            app.add_typer(getattr(import_module(f".{module}", __name__), attr), name=name)
    app.callback()(_root)
    return app


def flags_show_no_value_type(cmd: Any) -> None:
    """Blank the value-type column of every flag in ``cmd``'s help and its subcommands'.

    Rich help prints, beside each option, the type of the value it takes; typer (0.29)
    prints one for flags too, which take none: "--json <bool>", "--help <bool>" read
    as if `--json true` were the syntax. An explicit empty metavar is what that column
    shows instead. Only flags change (options that take a value keep "<int>", "<path>"
    ...), and only their help: parsing does not read the metavar."""
    # The help option is made on demand and kept (click's `get_help_option`); making
    # it here, with the names a fresh context has, is the one the help then lists.
    help_option = cmd.get_help_option(cmd.context_class(cmd))
    for param in [*cmd.params, help_option]:
        if param is not None and getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
    for sub in (getattr(cmd, "commands", None) or {}).values():
        flags_show_no_value_type(sub)


def summaries_flow(cmd: Any) -> None:
    """Give each subcommand of ``cmd`` (recursively) a one-paragraph summary for the
    command list of `fairlab --help`: its docstring's first paragraph with the
    source's line breaks made spaces. Typer (0.29) keeps those breaks, so the list
    read "… on a real kernel in a VM;" and then "write the Trace …" on a line of its
    own, broken where the docstring happened to wrap, not where the terminal does."""
    for sub in (getattr(cmd, "commands", None) or {}).values():
        if sub.short_help is None and sub.help:
            sub.short_help = " ".join(sub.help.split("\n\n")[0].split())
        summaries_flow(sub)


def __getattr__(name: str):  # type: ignore[no-untyped-def]
    # `fairlab.cli.app`, the whole app (tests, `typer.testing.CliRunner`), built on
    # first use so importing this package stays cheap.
    if name == "app":
        globals()["app"] = value = build_app()
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main(argv: list[str] | None = None) -> None:
    """Console entry point (`fairlab`, `python -m fairlab`)."""
    args = sys.argv[1:] if argv is None else argv
    only = args[0] if args and (args[0] in COMMANDS or args[0] in GROUPS) else None
    try:
        from .multi_value import refuse_values_after_repeatable_option

        cli = typer.main.get_command(build_app(only))
        refuse_values_after_repeatable_option(cli, args)
        # prog_name: `python -m fairlab` would otherwise call itself __main__.py in
        # help and in the shell-completion variable (_FAIRLAB_COMPLETE).
        cli(args=args, prog_name="fairlab", standalone_mode=True)
    except SystemExit as exc:
        # typer reports every KeyboardInterrupt as exit 130; a SIGTERM is 143.
        from ..interrupts import last_signal

        sig = last_signal()
        if exc.code == 130 and sig is not None:
            import signal

            from .common import err_console

            err_console.print(f"interrupted ({signal.Signals(sig).name}); everything it started was stopped")
            sys.exit(128 + sig)
        raise
    except KeyboardInterrupt as exc:
        from ..interrupts import exit_code
        from .common import err_console

        err_console.print("interrupted")
        sys.exit(exit_code(exc))  # 130 for SIGINT, 143 for SIGTERM
    except Exception as exc:
        # Imported here, not at the top: the error types live in modules (ingest, the
        # live backend, the store) that a successful `fairlab run` never needs.
        from rich.markup import escape

        from .common import USER_ERRORS, err_console

        if not isinstance(exc, USER_ERRORS):
            raise
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        sys.exit(2)
