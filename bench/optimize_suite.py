"""`assay optimize` offline (builtin generator) on six tasks with realistic GPU shapes (issue 5 evidence).

For each task under bench/fixtures/optimize/ it runs the real CLI in a fresh process
(`assay optimize TASK --device cuda --json`), then prints per workload shape the answer's time,
its speedup against each baseline with the 95% CI and the call, and its roofline fraction; and
checks the loop's promise: the answer is never slower than the best baseline.

Usage: python bench/optimize_suite.py [--budget 6] [--time-budget 300] [--only softmax,rmsnorm] [--device cuda]
       [--tasks DIR]   (e.g. tests/knowledge/tasks --device cpu for a CPU dry run of the script)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TASKS = ROOT / "bench" / "fixtures" / "optimize"
ORDER = ("softmax", "rmsnorm", "layernorm", "gelu_mul", "row_sum", "gemm_bias_relu")


def run_one(name: str, args: argparse.Namespace, work: Path) -> dict:
    out = work / f"{name}_best.py"
    cmd = [sys.executable, "-m", "assay.cli", "optimize", str(args.tasks / f"{name}.py"), "--device", args.device,
           "--budget", str(args.budget), "--time-budget", str(args.time_budget), "--out", str(out), "--json",
           "--db", f"sqlite:///{work / 'optimize.db'}", "--jobs", str(args.jobs),
           *[a for b in args.baseline.split(",") if b for a in ("--baseline", b)]]
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ})
    wall = time.monotonic() - t0
    try:
        summary = json.loads(r.stdout)
    except json.JSONDecodeError:
        return {"name": name, "error": (r.stderr or r.stdout)[-600:], "rc": r.returncode, "wall_s": wall}
    return {"name": name, "summary": summary, "rc": r.returncode, "wall_s": wall}


def report(res: dict) -> list[str]:
    name = res["name"]
    if "error" in res:
        return [f"{name} | FAILED rc={res['rc']} after {res['wall_s']:.0f} s: {res['error'].strip().splitlines()[-1:]}"]
    s = res["summary"]
    v = s.get("verdict") or {}
    timing = next((st for st in v.get("stages", []) if st["name"] == "timing"), None)
    lines = []
    never_slower = True
    for sh in (timing or {}).get("evidence", {}).get("shapes", []):
        dims = "x".join(str(x) for x in sh["dims"].values())
        parts = []
        for b, sp in sh.get("speedup", {}).items():
            parts.append(f"{b} {sp['estimate']:.3f} [{sp['lo']:.3f}, {sp['hi']:.3f}] {sp['call']}")
            never_slower &= sp["call"] != "slower"
        roof = (sh.get("roofline") or {}).get("fraction")
        lines.append(f"{name} | {dims} | {s['answer']} | {sh['candidate']['median'] * 1e6:.1f} us | "
                     f"{'; '.join(parts)} | {'-' if roof is None else f'{roof:.3f}'}")
    if not lines:
        lines.append(f"{name} | - | {s['answer']} | no timing in the answer's verdict | - | -")
    lines.append(f"{name} | beat baselines: {s['beat_baselines']} | never slower than a baseline: {never_slower} | "
                 f"stop: {s['stop']} | {res['wall_s']:.0f} s")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--budget", type=int, default=6, help="candidates per task (after the library baselines)")
    ap.add_argument("--time-budget", type=float, default=300.0, help="seconds per task")
    ap.add_argument("--only", default=",".join(ORDER))
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--jobs", type=int, default=1, help="evaluator processes per run (timing stays serial)")
    ap.add_argument("--baseline", default="", help="comma list passed as --baseline (default: the device's)")
    ap.add_argument("--tasks", type=Path, default=TASKS, help="folder of task files (default: the GPU-size six)")
    args = ap.parse_args()
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in names if not (args.tasks / f"{n}.py").exists()]
    if unknown:
        sys.exit(f"bench/optimize_suite.py: no task {unknown} under {args.tasks}")
    print("task | shape | answer | median | speedup vs each baseline [95% CI] call | roofline fraction", flush=True)
    with tempfile.TemporaryDirectory(prefix="assay-opt-suite-") as d:
        for name in names:
            for line in report(run_one(name, args, Path(d))):
                print(line, flush=True)


if __name__ == "__main__":
    main()
