"""The `fairlab` command line (typer + rich). Each command lives in its own module.

Bad input never produces a traceback: every error type fairlab raises for a user's
mistake is caught in `main` and printed as one sentence, with exit code 2.
"""

from __future__ import annotations

import sys

import typer
from rich.markup import escape

from . import analyze_cmd, campaign_cmds, compare_cmd, list_cmd, live_cmd, plan_cmd, run_cmd, validate_cmd, vm_cmd
from .common import USER_ERRORS, err_console

app = typer.Typer(
    name="fairlab",
    help="How fairly do transport flows share a bottleneck — and why?",
    no_args_is_help=True,
    add_completion=False,
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
    try:
        app(args=expand_multi_value_options(sys.argv[1:]), standalone_mode=True)
    except USER_ERRORS as exc:
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        sys.exit(2)
    except KeyboardInterrupt:
        err_console.print("interrupted")
        sys.exit(130)
