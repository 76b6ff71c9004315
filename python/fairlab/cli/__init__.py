"""The `fairlab` command line (typer + rich). Each command lives in its own module.

Bad input never produces a traceback: every error type fairlab raises for a user's
mistake is caught in `main` and printed as one sentence, with exit code 2.
"""

from __future__ import annotations

import sys

import typer
from rich.markup import escape

from .. import __version__
from . import analyze_cmd, campaign_cmds, compare_cmd, list_cmd, live_cmd, plan_cmd, run_cmd, validate_cmd, vm_cmd
from .common import USER_ERRORS, err_console
from .multi_value import refuse_values_after_repeatable_option

app = typer.Typer(
    name="fairlab",
    help="How fairly do transport flows share a bottleneck — and why?",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.command("analyze")(analyze_cmd.analyze)
app.command("run")(run_cmd.run)
app.command("plan")(plan_cmd.plan)
app.command("compare")(compare_cmd.compare)
app.command("validate")(validate_cmd.validate)
app.command("reproduce")(campaign_cmds.reproduce)
app.command("report")(campaign_cmds.report)
app.command("query")(campaign_cmds.query)
app.add_typer(list_cmd.app, name="list")
app.add_typer(live_cmd.app, name="live")
app.add_typer(vm_cmd.app, name="vm")


def _print_version(value: bool) -> None:
    if value:
        print(f"fairlab {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True, help="print fairlab's version and exit"),
) -> None:
    """How fairly do transport flows share a bottleneck — and why?"""


def main(argv: list[str] | None = None) -> None:
    """Console entry point (`fairlab`, `python -m fairlab`)."""
    args = sys.argv[1:] if argv is None else argv
    try:
        refuse_values_after_repeatable_option(typer.main.get_command(app), args)
        # prog_name: `python -m fairlab` would otherwise call itself __main__.py in
        # help and in the shell-completion variable (_FAIRLAB_COMPLETE).
        app(args=args, prog_name="fairlab", standalone_mode=True)
    except USER_ERRORS as exc:
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        sys.exit(2)
    except SystemExit as exc:
        # typer reports every KeyboardInterrupt as exit 130; a SIGTERM is 143.
        from ..interrupts import last_signal

        sig = last_signal()
        if exc.code == 130 and sig is not None:
            import signal

            err_console.print(f"interrupted ({signal.Signals(sig).name}); everything it started was stopped")
            sys.exit(128 + sig)
        raise
    except KeyboardInterrupt as exc:
        from ..interrupts import exit_code

        err_console.print("interrupted")
        sys.exit(exit_code(exc))  # 130 for SIGINT, 143 for SIGTERM
