"""The acceptance report (markdown) for the winner of an optimization run."""

from __future__ import annotations

from typing import Any

from assay.search.loop import RunResult
from assay.task.spec import Task
from assay.verdict import Verdict


def _speedups(v: Verdict) -> list[str]:
    t = v.stage("timing")
    rows = []
    if t is None:
        return ["(no timing)"]
    rows.append("| shape | candidate median | baseline | speedup | 95% CI | call | roofline fraction |")
    rows.append("|---|---|---|---|---|---|---|")
    for s in t.evidence.get("shapes", []):
        for name, x in s.get("speedup", {}).items():
            base = s["baselines"][name]["median"]
            rows.append(f"| {s['dims']} | {s['candidate']['median'] * 1e6:.1f} us | {name} {base * 1e6:.1f} us | "
                        f"{x['estimate']:.3f}x | [{x['lo']:.3f}, {x['hi']:.3f}] | {x['call']} | "
                        f"{s.get('roofline', {}).get('fraction')} |")
    return rows


def render(task: Task, result: RunResult) -> str:
    win = result.best or result.baseline_best
    out: list[str] = [f"# Acceptance report: {task.name} (run {result.run_id})", ""]
    if win is None:
        return "\n".join(out + ["No candidate, not even a library baseline, was accepted.", ""])
    v = win.verdict
    verdict_line = ("A generated kernel beat every baseline and passed the held-out check."
                    if result.beat_baselines else
                    "Nothing beat the best baseline: the answer is the best baseline (an existing primitive).")
    corr = v.stage("correctness").evidence if v.stage("correctness") else {}
    integ = v.stage("integrity").evidence if v.stage("integrity") else {}
    env = v.environment
    out += [verdict_line, "",
            "## Scope",
            f"- shapes (workloads): {[w.dims for w in task.workloads]}; dims {{{', '.join(f'{k}: {d.low}..{d.high}' for k, d in task.dims.items())}}}",
            f"- dtypes: {list(task.dtypes)}; layouts: {sorted({l for i in task.inputs for l in i.layouts})}",
            f"- device: {v.device}; torch {env.get('torch')}, triton {env.get('triton')}, CUDA {env.get('cuda')}, "
            f"GPU {env.get('gpu', env.get('cpu'))}",
            "", "## Correctness",
            f"- {corr.get('passed', 0)}/{corr.get('ran', 0)} cases passed ({corr.get('planned', 0)} planned), "
            f"kinds: {corr.get('kinds')}",
            f"- held-out check (fresh secret, perturbed shapes): "
            f"{'passed' if result.held_out and result.held_out.accepted else 'not run' if result.held_out is None else 'FAILED'}",
            "", "## Numerics",
            f"- max abs error {corr.get('max_abs_err')}, max relative norm error {corr.get('max_norm_err')} "
            "(tolerances calibrated from the reference's own error; see docs/task-format.md)",
            "", "## Performance against each baseline", *_speedups(v),
            "", "## Stability across repeats"]
    if result.held_out is not None and result.held_out.stage("timing") is not None:
        g1 = (v.stage("timing").evidence.get("geomean_speedup") or {}) if v.stage("timing") else {}
        g2 = result.held_out.stage("timing").evidence.get("geomean_speedup") or {}
        out.append(f"- geomean speedup in the search: {g1}; in the held-out re-check: {g2}")
    else:
        out.append("- one measurement only")
    out += ["", "## Dispatch and fallback",
            f"- label: {integ.get('label')}; per shape: {[(s['dims'], s['path']) for s in integ.get('shapes', [])]}",
            f"- weighted fallback fraction: {integ.get('fallback_weight_fraction')}",
            "", "## Safety",
            f"- sandbox: {corr.get('containment')}",
            f"- static findings: {[f.message for s in v.stages if s.name == 'static_scan' for f in s.findings] or 'none'}",
            "", "## Provenance",
            f"- generator: {win.generator}; mode {win.mode}; parent {win.parent}; candidate id {v.candidate.get('id')}",
            f"- budget spent: {result.spent}; stop: {result.stop_reason}",
            "", "## Maintenance",
            "- re-validate after a torch, triton, CUDA or driver upgrade (`assay check` on the written file);",
            f"- build cache key: {(v.stage('build').evidence or {}).get('cache_key') if v.stage('build') else None}",
            ""]
    return "\n".join(out)


def summary_json(task: Task, result: RunResult) -> dict[str, Any]:
    win = result.best or result.baseline_best
    sp = {}
    if win is not None and win.verdict.stage("timing") is not None:
        sp = win.verdict.stage("timing").evidence.get("geomean_speedup") or {}
    return {"run_id": result.run_id, "task": task.name, "beat_baselines": result.beat_baselines,
            "answer": (win.generator if win else None), "speedups": sp, "budget_spent": result.spent,
            "stop": result.stop_reason,
            "verdict": win.verdict.model_dump(mode="json") if win else None}
