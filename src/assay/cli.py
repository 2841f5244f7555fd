"""The `assay` command line. Exit codes: 0 accepted, 1 rejected, 2 user error."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console
from rich.table import Table

from assay.config import CheckConfig, default_db_url
from assay.errors import UserError
from assay.verdict import Status, Verdict

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Make GPU kernels faster and prove it.")
err = Console(stderr=True)
out = Console()


def _fail(e: UserError) -> None:
    err.print(f"assay: error: {e}", markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(2)


@app.command()
def check(
    candidate: Path = typer.Argument(..., help="candidate file (ModelNew or the task's entry function)"),
    task: Path = typer.Option(..., "--task", "-t", help="native task file or KernelBench problem"),
    json_out: bool = typer.Option(False, "--json", help="print exactly the JSON verdict on stdout"),
    device: Optional[str] = typer.Option(None, "--device", help="cpu or cuda (default: cuda when available)"),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="print the case plan and each case"),
    time_budget: float = typer.Option(20.0, "--time-budget", help="seconds for correctness cases"),
    case_timeout: float = typer.Option(60.0, "--case-timeout", help="seconds per call before the worker is killed"),
    replay: Optional[str] = typer.Option(None, "--replay", help="run only this case token (from a verdict)"),
    allow_primitive: bool = typer.Option(False, "--allow-primitive",
                                         help="accept candidates whose work is done by torch library ops"),
    timing: bool = typer.Option(True, "--timing/--no-timing", help="time the candidate against live baselines"),
    profile: bool = typer.Option(False, "--profile", help="profile a passing candidate with ncu (cuda): "
                                 "speed-of-light metrics and a bottleneck class"),
    baseline: list[str] = typer.Option([], "--baseline", help="baseline to time against (repeatable): eager, "
                                       "compile, compile:MODE; default: eager + compile modes on cuda, eager on cpu"),
    db: str = typer.Option(default_db_url(), "--db", help="SQLAlchemy URL of the store (env ASSAY_DB)"),
    no_store: bool = typer.Option(False, "--no-store", help="do not record this check"),
) -> None:
    """Run the whole gauntlet for one candidate against one task."""
    from assay.evaluate import check as run_check

    if device not in (None, "cpu", "cuda"):
        _fail(UserError(f"--device must be cpu or cuda, not {device!r}"))
    try:
        cfg = CheckConfig.for_device(device, time_budget=time_budget, case_timeout=case_timeout,
                                     replay=replay, require_custom_kernel=not allow_primitive, timing=timing,
                                     baselines=_baselines(baseline), profile=profile)
        if cfg.device == "cuda":
            import torch

            if not torch.cuda.is_available():
                raise UserError("--device cuda, but no CUDA device is available")
        stores: list[Any] = []

        def open_store() -> None:  # imports SQLAlchemy (~0.3 s): done while the worker runs the first case
            if not no_store and not stores:
                from assay.store.db import Store

                stores.append(Store(db))

        log = (lambda s: err.print(s, markup=False, highlight=False)) if verbose else None
        verdict = run_check(candidate, task, config=cfg, log=log, while_waiting=open_store)
        open_store()  # (when the check ended before its first case)
        store = stores[0] if stores else None
        if store is not None:
            verdict_id = store.record(verdict, Path(task).read_text(), Path(candidate).read_text())
            if not json_out:
                err.print(f"recorded as check {verdict_id} in {db}", style="dim", markup=False)
    except UserError as e:
        _fail(e)
        return
    if json_out:
        sys.stdout.write(verdict.model_dump_json(indent=2) + "\n")
    else:
        print_verdict(verdict)
    code = 0 if verdict.accepted else 1
    if _standalone():
        # the process ends here, its verdict written and stored: skip the interpreter's teardown
        # of torch, triton and SQLAlchemy (~0.6 s of module finalisation and garbage collection)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    raise typer.Exit(code)


def _standalone() -> bool:
    """Running as the `assay` command (not called from Python, as a test's runner does)."""
    main = sys.modules.get("__main__")
    return Path(sys.argv[0]).name == "assay" or getattr(main, "__spec__", None) is not None and \
        getattr(main.__spec__, "name", "") == "assay.cli"


def print_verdict(v: Verdict) -> None:
    head = "[bold green]ACCEPTED[/]" if v.accepted else "[bold red]REJECTED[/]"
    c = v.candidate
    out.print(f"{head}  {c.get('path')}  ({c.get('language')}: {c.get('label')})  task {v.task.get('name')}"
              f"  on {v.device}  in {v.seconds:.1f} s")
    table = Table(show_header=True, header_style="bold")
    for col in ("stage", "status", "seconds", "detail"):
        table.add_column(col)
    colors = {Status.passed: "green", Status.failed: "red", Status.warning: "yellow", Status.skipped: "dim"}
    for s in v.stages:
        detail = ""
        if s.name == "correctness" and s.evidence:
            e = s.evidence
            detail = f"{e.get('passed', 0)}/{e.get('ran', 0)} cases passed ({e.get('planned', 0)} planned)"
        elif s.name == "static_scan":
            detail = f"{len(s.findings)} findings"
        elif s.name == "build" and s.evidence:
            detail = "cache hit" if s.evidence.get("cache_hit") else ""
        elif s.name == "integrity" and s.evidence:
            detail = ", ".join(f"{x['path']}" for x in s.evidence.get("shapes", []))
        elif s.name == "timing" and s.evidence.get("geomean_speedup"):
            detail = "speedup " + ", ".join(f"{k} {v:.3g}x" for k, v in s.evidence["geomean_speedup"].items())
        table.add_row(s.name, f"[{colors[s.status]}]{s.status.value}[/]", f"{s.seconds:.2f}", detail)
    out.print(table)
    for r in v.reasons:
        out.print(f"[red]{r.category.value}[/]: ", end="")
        out.print(r.message, markup=False, highlight=False)
    for s in v.stages:
        for f in s.findings:
            if not f.rejects:
                out.print(f"[yellow]{s.name}[/] ({f.category.value}): ", end="")
                out.print(f.message, markup=False, highlight=False)


@app.command()
def optimize(
    task: Optional[Path] = typer.Argument(None, help="native task file or KernelBench problem"),
    generator: list[str] = typer.Option([], "--generator", "-g",
                                        help="builtin | openai:MODEL | anthropic:MODEL | agent:COMMAND (repeatable)"),
    budget: int = typer.Option(12, "--budget", help="most candidates to evaluate"),
    time_budget: float = typer.Option(900.0, "--time-budget", help="seconds for the whole run"),
    check_budget: float = typer.Option(10.0, "--check-budget", help="seconds of correctness cases per candidate"),
    device: Optional[str] = typer.Option(None, "--device", help="cpu or cuda (default: cuda when available)"),
    out_file: Path = typer.Option(Path("best_kernel.py"), "--out", help="where the answer is written"),
    json_out: bool = typer.Option(False, "--json", help="print a JSON summary on stdout"),
    resume: Optional[int] = typer.Option(None, "--resume", help="continue run RUN from the store"),
    usd_budget: Optional[float] = typer.Option(None, "--usd-budget", help="stop after spending this much on LLM calls"),
    token_budget: Optional[int] = typer.Option(None, "--token-budget", help="stop after this many LLM tokens"),
    device_budget: Optional[float] = typer.Option(None, "--device-budget",
                                                  help="stop after this many seconds of evaluation"),
    roofline_stop: float = typer.Option(0.9, "--roofline-stop", help="stop once a candidate reaches this fraction "
                                        "of the roofline at every shape (0: never)"),
    price_in: float = typer.Option(0.0, "--price-in", help="USD per input token (LLM generators)"),
    price_out: float = typer.Option(0.0, "--price-out", help="USD per output token (LLM generators)"),
    db: str = typer.Option(default_db_url(), "--db", help="SQLAlchemy URL of the store"),
    jobs: int = typer.Option(1, "--jobs", "-j", help="proposals checked at once, each in its own evaluator "
                             "process; timing still runs one candidate at a time"),
    beam: int = typer.Option(4, "--beam", help="parents of new proposals: drawn from the fastest K measured kernels"),
    islands: bool = typer.Option(False, "--islands", help="parents from the proposing generator's own kernels "
                                 "(with occasional migration)"),
    seed: int = typer.Option(0, "--seed", help="seed of parent selection and of the offline tuner"),
    baseline: list[str] = typer.Option([], "--baseline", help="baselines every candidate is timed against "
                                       "(repeatable: eager, compile, compile:MODE; default: the device's)"),
) -> None:
    """Search for a faster kernel: propose, check, keep the best; never slower than a baseline."""
    import json as _json

    from assay.report.acceptance import render, summary_json
    from assay.search.budget import Budget
    from assay.search.factory import make_generators
    from assay.search.loop import SearchConfig, Supervisor
    from assay.search.parents import ParentPolicy
    from assay.store.db import Store
    from assay.store.runs import RunStore
    from assay.task import load_task

    if device not in (None, "cpu", "cuda"):
        _fail(UserError(f"--device must be cpu or cuda, not {device!r}"))
    try:
        from assay.knowledge.memory import Memory

        store = Store(db)
        runs = RunStore(store)
        if resume is not None:
            row = runs.run(resume)
            if row is None:
                raise UserError(f"no run with id {resume}", db)
            task = Path(row.task_path)
        if task is None:
            raise UserError("name a task file (or --resume RUN)")
        t = load_task(task)
        cfg = CheckConfig.for_device(device, time_budget=check_budget, baselines=_baselines(baseline))
        gens = make_generators(generator, t, cfg.device, seed=seed, price_in=price_in, price_out=price_out)
        log = (lambda s: err.print(s, markup=False, highlight=False))
        if beam < 1:
            raise UserError(f"--beam must be at least 1, not {beam}")
        search = SearchConfig(jobs=jobs, parents=ParentPolicy(beam=beam, islands=islands, seed=seed))
        for name, value in (("--budget", budget), ("--time-budget", time_budget), ("--token-budget", token_budget),
                            ("--usd-budget", usd_budget), ("--device-budget", device_budget),
                            ("--roofline-stop", roofline_stop)):
            if value is not None and value < 0:
                raise UserError(f"{name} must not be negative, not {value}")
        limits = Budget(candidates=budget, seconds=time_budget, usd=usd_budget, tokens=token_budget,
                        device_seconds=device_budget, roofline_stop=roofline_stop or None)
        sup = Supervisor(t, gens, cfg, limits, runs, run_id=resume,
                         progress=log, memory=Memory(store), search=search)
        result = sup.run()
    except UserError as e:
        _fail(e)
        return
    win = result.best or result.baseline_best
    if win is not None:
        out_file.write_text(win.source)
        out_file.with_suffix(".report.md").write_text(render(t, result))
    summary = summary_json(t, result)
    if json_out:
        sys.stdout.write(_json.dumps(summary, indent=2) + "\n")
    else:
        msg = ("a generated kernel beat every baseline" if result.beat_baselines
               else "nothing beat the best baseline; the answer is the baseline")
        out.print(f"run {result.run_id}: {msg}; answer {summary['answer']} written to {out_file}; "
                  f"speedups {summary['speedups']}; spent {result.spent}; stop: {result.stop_reason}")
    raise typer.Exit(0 if win is not None else 1)


def _baselines(names: list[str]) -> tuple[str, ...] | None:
    """``--baseline`` values, checked (None: the device's default set)."""
    from assay.config import known_baseline

    for b in names:
        if not known_baseline(b):
            raise UserError(f"--baseline must be eager, compile or compile:MODE, not {b!r}")
    return tuple(names) or None


@app.command()
def history(
    limit: int = typer.Option(20, "--limit", "-n"),
    db: str = typer.Option(default_db_url(), "--db", help="SQLAlchemy URL of the store"),
) -> None:
    """List recent checks from the store."""
    from assay.store.db import Store

    try:
        rows = Store(db).history(limit)
    except UserError as e:
        _fail(e)
        return
    table = Table("id", "when", "task", "candidate", "lang", "device", "verdict", "reasons", "s")
    for r in rows:
        table.add_row(str(r["id"]), r["created"], r["task"], r["candidate"], r["language"], r["device"],
                      "[green]accepted[/]" if r["accepted"] else "[red]rejected[/]", r["categories"], str(r["seconds"]))
    out.print(table)


@app.command()
def show(
    check_id: int = typer.Argument(..., help="check id from `assay history`"),
    db: str = typer.Option(default_db_url(), "--db"),
) -> None:
    """Print one recorded verdict as JSON."""
    from assay.store.db import Store

    try:
        v = Store(db).verdict(check_id)
    except UserError as e:
        _fail(e)
        return
    if v is None:
        _fail(UserError(f"no check with id {check_id}", db))
        return
    sys.stdout.write(v.model_dump_json(indent=2) + "\n")


if __name__ == "__main__":
    app()
