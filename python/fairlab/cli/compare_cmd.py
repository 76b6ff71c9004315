"""`fairlab compare SCENARIO`: the simulator's prediction beside real Linux TCP —
the host's kernel (``--reference live``, root) or a stock kernel in a QEMU guest in
virtual time (``--reference vm``, no root, immune to host load).

One run per backend says little about a pair whose result turns on which flow loses
first; `--runs N` (default: the scenario's `runs`) repeats both sides with the seeds a
campaign would use and reports mean ± std over the runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import typer
from rich.markup import escape
from rich.table import Table

from ..analysis import Analysis, analyze
from ..campaign.paths import slug
from ..campaign.plan import derive_seed
from ..campaign.aggregate import fmt_stat
from ..metrics.stats import run_stats
from ..runner import run_scenario
from ..scenario import load_scenario
from ..trace import Trace, concat
from .common import console, err_console
from .render import fmt_rate_pm

REFERENCES = ("live", "vm")


def compare(
    scenario: Path = typer.Argument(..., help="a scenario file without a sweep"),
    seed: Optional[int] = typer.Option(None, "--seed", help="override the scenario's base seed"),
    runs: Optional[int] = typer.Option(None, "--runs", min=1, help="runs per backend (default: the scenario's runs); run k uses the seed a campaign derives for it"),
    out: Optional[Path] = typer.Option(None, "--out", help="directory for both traces (default out/<name>-compare)"),
    as_json: bool = typer.Option(False, "--json", help="print both sides' analyses and their summary as one JSON document"),
    reference: str = typer.Option("live", "--reference", help="the real kernel to hold the simulator against: live (this host's kernel, root) or vm (a stock kernel in QEMU)"),
    tcp_probe: bool = typer.Option(False, "--tcp-probe", help="with --reference vm and one run: also record every sender's state at each ACK on both sides (the kernel's tcp:tcp_probe, the simulator's own), plot the windows side by side (cwnd.png) and compare slow-start exit, first ssthresh, reductions and mean window per flow"),
    queue_trace: bool = typer.Option(False, "--queue-trace", help="with --reference vm and one run: also record every packet at the bottleneck queue on both sides and compare, per flow, drops, the overflow episodes that hit it, and how its packets reach the queue (runs, bursts; docs/queue-trace.md)"),
) -> None:
    """Run a scenario on the simulator and on real Linux TCP and show per-flow
    throughput and Jain's index side by side."""
    if reference not in REFERENCES:
        from ..analysis import AnalysisError

        raise AnalysisError(f"--reference {reference!r} is not known; allowed: {', '.join(REFERENCES)}")
    BACKENDS = ("sim", reference)
    model = load_scenario(scenario)
    base = model.seed if seed is None else seed
    n = model.runs if runs is None else runs
    if tcp_probe and (reference != "vm" or n != 1):
        from .common import UsageError

        raise UsageError("--tcp-probe lays one run's per-ACK traces side by side: it needs --reference vm (the "
                         f"kernel's tcp:tcp_probe) and one run (--runs 1; this comparison has {n})")
    if queue_trace and (reference != "vm" or n != 1):
        from .common import UsageError

        raise UsageError("--queue-trace lays one run's bottleneck traces side by side: it needs --reference vm and one "
                         f"run (--runs 1; this comparison has {n})")
    seeds = [derive_seed(base, k) for k in range(n)]
    window = None if model.window is None else (model.window[0] / 1e9, model.window[1] / 1e9)
    out_dir = out or Path("out") / f"{slug(model.name)}-compare"
    out_dir.mkdir(parents=True, exist_ok=True)
    traces: dict[str, Trace] = {}
    analyses: dict[str, list[Analysis]] = {}
    for backend in BACKENDS:
        per_run = []
        for k, s in enumerate(seeds):
            if not as_json:
                err_console.print(f"running {backend}" + (f", run {k + 1} of {n} (seed {s})" if n > 1 else "") + " …")
            probe_path = out_dir / f"{backend}.tcp_probe.parquet" if tcp_probe else None
            queue_path = out_dir / f"{backend}.queue.parquet" if queue_trace else None
            per_run.append(run_scenario(model, seed=s, backend=backend, run_index=k, tcp_probe_path=probe_path,
                                        queue_trace_path=queue_path))
        traces[backend] = concat(per_run)
        traces[backend].to_parquet(out_dir / f"{backend}.parquet")
        analyses[backend] = [analyze(traces[backend], window=window, run=k) for k in range(n)]
    summary = {b: _summary(analyses[b]) for b in BACKENDS}
    ref_meta = traces[reference].meta
    probes = _ack_traces(out_dir, BACKENDS, traces["sim"].labels, window) if tcp_probe else None
    queues = _queue_traces(out_dir, BACKENDS, model.resolve(seed=seeds[0]), window) if queue_trace else None
    if as_json:
        doc: dict[str, Any] = {
            "scenario": str(scenario),
            "seed": base,
            "runs": n,
            "seeds": seeds,
            "summary": {b: _summary_json(summary[b]) for b in BACKENDS},
            "sim": analyses["sim"][0].to_dict(),
            "reference": reference,
            reference: analyses[reference][0].to_dict(),
            "per_run": {b: [a.to_dict() for a in analyses[b]] for b in BACKENDS},
            f"{reference}_meta": {k: ref_meta.get(k) for k in ("emulation", "kernel", "warnings", "vm") if k in ref_meta},
        }
        if probes is not None:
            doc["tcp_probe"] = {b: [f.to_dict() for f in probes[b]] for b in BACKENDS}
        if queues is not None:
            doc["queue_trace"] = {b: [f.to_dict() for f in queues[b]] for b in BACKENDS}
        print(json.dumps(doc, indent=2, allow_nan=False, default=str))
        return
    _print_tables(model.name, analyses, summary, n, reference)
    if probes is not None:
        _print_ack_table(probes, traces["sim"].labels, reference)
        console.print(f"per-ACK traces in {out_dir}/sim.tcp_probe.parquet and {out_dir}/{reference}.tcp_probe.parquet; "
                      f"windows side by side in {out_dir}/cwnd.png")
    if queues is not None:
        _print_queue_table(queues, traces["sim"].labels, reference)
        console.print(f"bottleneck traces in {out_dir}/sim.queue.parquet and {out_dir}/{reference}.queue.parquet "
                      "(docs/queue-trace.md)")
    for w in ref_meta.get("warnings", []) or []:
        console.print(f"[yellow]{reference} warning:[/] {escape(str(w))}")
    if reference == "live":
        emu = ref_meta.get("emulation") or {}
        how = f"{emu.get('path', '?')} — {emu.get('why', '')}" if isinstance(emu, dict) else str(emu)
        console.print(f"live emulation: {escape(how)}")
    else:
        console.print(f"vm: kernel {escape(str(ref_meta.get('kernel')))}, image {escape(str((ref_meta.get('vm') or {}).get('image_key')))}")
    runs_note = f" ({n} runs each, column `run`)" if n > 1 else ""
    console.print(f"traces in {out_dir}/sim.parquet and {out_dir}/{reference}.parquet{runs_note}")


def _summary(analyses: list[Analysis]) -> dict[str, Any]:
    """Mean, std and 95 % CI over runs of each flow's mean throughput and both Jain
    variants (`metrics.stats.run_stats`)."""
    flows = [
        {"flow": f.flow, "label": f.label, "cca": f.cca, "mean_bps": run_stats([a.flows[i].mean_bps for a in analyses])}
        for i, f in enumerate(analyses[0].flows)
    ]
    return {
        "flows": flows,
        "jain_mean_jt": run_stats([a.jain.mean_jt for a in analyses]),
        "jain_of_means": run_stats([a.jain.of_means for a in analyses]),
    }


def _summary_json(summary: dict[str, Any]) -> dict[str, Any]:
    return {
        "flows": [{**f, "mean_bps": f["mean_bps"].to_dict()} for f in summary["flows"]],
        "jain_mean_jt": summary["jain_mean_jt"].to_dict(),
        "jain_of_means": summary["jain_of_means"].to_dict(),
    }


def _print_tables(name: str, analyses: dict[str, list[Analysis]], summary: dict[str, Any], n: int, reference: str) -> None:
    sim0 = analyses["sim"][0]
    over = f", mean ± std over {n} runs" if n > 1 else ""
    t = Table(title=f"{name}: simulator vs {reference} (window {sim0.window[0]:g}–{sim0.window[1]:g} s{over})", title_justify="left")
    for c in ("flow", "cca", "sim throughput", f"{reference} throughput", f"{reference} / sim"):
        t.add_column(c, justify="left" if c in ("flow", "cca") else "right")
    for fs, fl in zip(summary["sim"]["flows"], summary[reference]["flows"]):
        ss, sl = fs["mean_bps"], fl["mean_bps"]
        ratio = "—" if not ss.mean or sl.mean is None else f"{sl.mean / ss.mean:.2f}"
        t.add_row(fs["label"], fs["cca"] or "—", fmt_rate_pm(ss.mean, ss.std), fmt_rate_pm(sl.mean, sl.std), ratio)
    console.print(t)
    j = Table(title="Jain's index", title_justify="left")
    for c in ("variant", "sim", reference):
        j.add_column(c, justify="left" if c == "variant" else "right")
    for name, key in (("mean of J(t)", "jain_mean_jt"), ("J of mean throughputs", "jain_of_means")):
        j.add_row(name, fmt_stat(summary["sim"][key], dp=4), fmt_stat(summary[reference][key], dp=4))
    console.print(j)
    if n == 1 and len(summary["sim"]["flows"]) > 1:
        console.print("[dim]one run on each side: flows that share a queue can split differently with another "
                      "seed on either backend, so one run cannot say whether the two differ; `--runs 5` gives "
                      "means ± std over the same seeds on both[/]")


def _ack_traces(out_dir: Path, backends: tuple[str, ...], labels: dict[int, str],
                window: tuple[float, float] | None) -> dict[str, list]:
    """Read both sides' per-ACK traces, draw cwnd.png and summarise each flow."""
    import pandas as pd

    from ..metrics.ack_trace import summarize
    from ..report.plots import plot_ack_traces
    from ..report.style import save_figure

    frames = {b: pd.read_parquet(out_dir / f"{b}.tcp_probe.parquet") for b in backends}
    # The kernel's trace first: it is the reference the simulator's is drawn against.
    ordered = {b: frames[b] for b in sorted(backends, key=lambda b: b == "sim")}
    save_figure(plot_ack_traces(ordered, labels, window=window), out_dir, "cwnd", formats=("png", "svg"), dpi=150)
    return {b: summarize(frames[b], window=window) for b in backends}


def _num(x, fmt: str, scale: float = 1.0) -> str:
    """``x × scale`` formatted, or a dash where a side has no value."""
    return "—" if x is None else format(x * scale, fmt)


def _print_ack_table(probes: dict[str, list], labels: dict[int, str], reference: str) -> None:
    num = _num

    def pct(x):
        return "—" if x is None else f"{100 * x:.0f} %"

    def kb(x):
        return "—" if x is None else f"{x / 1000:.1f}"

    t = Table(title="per-ACK traces: where each flow's window went (sim / " + reference + ")", title_justify="left")
    for c in ("flow", "ACKs", "slow start ends (s)", "peak cwnd", "first ssthresh", "reductions", "mean cwnd",
              "ACKs releasing nothing", "mean release (kB)"):
        t.add_column(c, justify="left" if c == "flow" else "right")
    # Paired by flow id: a flow with no ACK on one side (a DCCP flow, or one that
    # never got going) has no summary there.
    ref = {f.flow: f for f in probes[reference]}
    for fs in probes["sim"]:
        fr = ref.get(fs.flow)
        if fr is None:
            continue
        t.add_row(
            escape(labels.get(fs.flow, str(fs.flow))),
            f"{fs.acks:,} / {fr.acks:,}",
            f"{num(fs.slow_start_end_s, '.3f')} / {num(fr.slow_start_end_s, '.3f')}",
            f"{fs.slow_start_peak_segments:,} / {fr.slow_start_peak_segments:,}",
            f"{num(fs.first_ssthresh_segments, ',.0f')} / {num(fr.first_ssthresh_segments, ',.0f')}",
            f"{fs.reductions} / {fr.reductions}",
            f"{fs.mean_cwnd_segments:,.0f} / {fr.mean_cwnd_segments:,.0f}",
            f"{pct(fs.silent_ack_share)} / {pct(fr.silent_ack_share)}",
            f"{kb(fs.mean_release_bytes)} / {kb(fr.mean_release_bytes)}",
        )
    console.print(t)



def _queue_traces(out_dir: Path, backends: tuple[str, ...], resolved: dict,
                  window: tuple[float, float] | None) -> dict[str, list]:
    """Read both sides' bottleneck traces and summarise each flow (`metrics.queue_trace`)."""
    import pandas as pd

    from ..metrics.queue_trace import gaps_for, summarize

    gaps = gaps_for(resolved)
    return {b: summarize(pd.read_parquet(out_dir / f"{b}.queue.parquet"), window=window, **gaps) for b in backends}


def _print_queue_table(queues: dict[str, list], labels: dict[int, str], reference: str) -> None:
    num = _num
    t = Table(title=f"the bottleneck queue: who lost what, and how each flow's packets arrived (sim / {reference})",
              title_justify="left")
    for c in ("flow", "packets", "drops", "drop rate", "overflow episodes hit", "episodes present", "drops per hit", "median run",
              "mean burst"):
        t.add_column(c, justify="left" if c == "flow" else "right")
    ref = {f.flow: f for f in queues[reference]}
    for fs in queues["sim"]:
        fr = ref.get(fs.flow)
        if fr is None:
            continue
        t.add_row(
            escape(labels.get(fs.flow, str(fs.flow))),
            f"{fs.packets:,} / {fr.packets:,}",
            f"{fs.drops:,} / {fr.drops:,}",
            f"{num(fs.drop_rate, '.2f', 100)} / {num(fr.drop_rate, '.2f', 100)} %",
            f"{fs.episodes_hit} of {fs.episodes} / {fr.episodes_hit} of {fr.episodes}",
            f"{fs.episodes_present} / {fr.episodes_present}",
            f"{num(fs.drops_per_hit, '.1f')} / {num(fr.drops_per_hit, '.1f')}",
            f"{num(fs.median_run, '.0f')} / {num(fr.median_run, '.0f')}",
            f"{num(fs.mean_burst, '.1f')} / {num(fr.mean_burst, '.1f')}",
        )
    console.print(t)
