"""Wall time of `assay check` (the real CLI, a fresh process each run) for a small Triton task on CPU.

Usage: python bench/check_walltime.py [--runs 3] [--no-timing]
Prints one line per run and the median; the target is under 10 s.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TASK = ROOT / "examples" / "softmax_small_task.py"
CAND = ROOT / "examples" / "softmax_triton.py"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--no-timing", action="store_true", help="pass --no-timing to assay check")
    args = ap.parse_args()
    times = []
    with tempfile.TemporaryDirectory() as d:
        env = {**os.environ, "ASSAY_DB": f"sqlite:///{d}/bench.db"}
        for i in range(args.runs):
            t0 = time.perf_counter()
            r = subprocess.run([sys.executable, "-m", "assay.cli", "check", str(CAND), "--task", str(TASK),
                                "--device", "cpu", "--json", *(["--no-timing"] if args.no_timing else [])],
                               capture_output=True, text=True, env=env)
            dt = time.perf_counter() - t0
            import json

            v = json.loads(r.stdout)
            corr = next(s for s in v["stages"] if s["name"] == "correctness")
            print(f"run {i}: {dt:.2f} s  exit={r.returncode} accepted={v['accepted']} "
                  f"cases={corr['evidence']['ran']}/{corr['evidence']['planned']} "
                  f"build={next(s for s in v['stages'] if s['name'] == 'build')['seconds']:.2f} s "
                  f"correctness={corr['seconds']:.2f} s")
            times.append(dt)
    print(f"median wall time: {statistics.median(times):.2f} s over {len(times)} runs (target < 10 s)")


if __name__ == "__main__":
    main()
