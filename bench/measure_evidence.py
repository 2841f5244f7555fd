"""Evidence that assay's timing can be trusted (run on a CUDA GPU; prints a table per item).

a. A/A: one Triton kernel as candidate and as baseline, 5 separate runs: median ratio ~1.0
b. event time vs the profiler's kernel time (and the graph-replay hot time), several sizes
c. a variant ~3% slower is called slower, not SAME
d. a side-stream cheat and a pointer-cache cheat get no speedup (rejected)
e. a copy kernel's achieved bandwidth vs the measured ceiling
f. eager vs torch.compile vs a Triton softmax at 3 shapes, with CIs and roofline fractions

Usage: python bench/measure_evidence.py [--only a,b,...]
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
import tempfile
import time
from pathlib import Path

import torch

from assay.candidate.source import load_candidate
from assay.config import CheckConfig
from assay.evaluate import _build, _build_env, check
from assay.measure.stage import TimingConfig, run_timing
from assay.sandbox.process import Worker
from assay.task import Dim, Input, Task, Workload, load_task

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "bench" / "fixtures"
OPS = (FIX / "triton_ops.py").read_text()
CACHE = Path(tempfile.mkdtemp(prefix="assay-bench-cache-"))


def candidate_file(name: str, body: str) -> Path:
    p = CACHE / f"{name}.py"
    p.write_text(body)
    return p


def time_it(task: Task, cand: Path, baselines=("eager",), **kw) -> dict:
    t0 = time.monotonic()
    try:
        return _time_it(task, cand, baselines, **kw)
    finally:
        print(f"  [time_it {cand.name}: {time.monotonic() - t0:.1f} s]", flush=True)


def _time_it(task: Task, cand: Path, baselines=("eager",), **kw) -> dict:
    cfg = CheckConfig(device="cuda", cache_dir=CACHE)
    c = load_candidate(cand, task.entry_name)
    w = Worker(device="cuda", cache_dir=CACHE, extra_env=_build_env(c, cfg))
    w.start()
    try:
        b = _build(c, task, w, cfg)
        assert b.status.value == "passed", b.findings
        st = run_timing(task, w, "cuda", secrets.token_bytes(16), TimingConfig(baselines=baselines, **kw), CACHE)
    finally:
        w.close()
    return st.model_dump(mode="json")


def us(s: float | None) -> str:
    return "-" if s is None else f"{s * 1e6:9.1f}"


def item_a() -> None:
    task = load_task(FIX / "aa_softmax_task.py")
    cand = ROOT / "examples" / "softmax_triton.py"
    print("\n## a. A/A: Triton softmax 16384x4096 fp32 as candidate and as baseline, 5 runs")
    print("run | candidate median us | baseline median us | ratio | 95% CI | call")
    ratios = []
    for i in range(5):
        st = time_it(task, cand, max_time=3.0)
        s = st["evidence"]["shapes"][0]
        sp = s["speedup"]["eager"]
        ratios.append(sp["estimate"])
        print(f"{i} | {us(s['candidate']['median'])} | {us(s['baselines']['eager']['median'])} | "
              f"{sp['estimate']:.4f} | [{sp['lo']:.4f}, {sp['hi']:.4f}] | {sp['call']} | rounds {s['rounds']} "
              f"n {s['candidate']['n']}/{s['baselines']['eager']['n']} block {s['block_s']}", flush=True)
    ratios.sort()
    print(f"median ratio over 5 runs: {ratios[2]:.4f} (target within 1% of 1.0)")


def item_b() -> None:
    print("\n## b. cold event time vs profiler kernel time vs hot (graph replay), Triton softmax fp32,")
    print("   with the L2 flushed by writing (zeroing) a buffer or by reading one (timing.Flusher)")
    print("shape | flush | cold median us | profiler kernel us | cold/kernel | hot us")
    cand = ROOT / "examples" / "softmax_triton.py"
    for m, n in ((4096, 1024), (8192, 4096), (32768, 4096)):
        for flush in ("write", "read"):
            task = load_task(FIX / "aa_softmax_task.py")
            task.workloads = (Workload({"M": m, "N": n}),)
            st = time_it(task, cand, max_time=3.0, flush=flush)
            s = st["evidence"]["shapes"][0]
            k = s.get("profiler_kernel_s")
            ratio = f"{s['candidate']['median'] / k:.3f}" if k else "-"
            print(f"{m}x{n} | {flush} | {us(s['candidate']['median'])} | {us(k)} | {ratio} | {us(s.get('hot_s'))}",
                  flush=True)
    # the fixed part of a cold sample: a 1-cycle spin kernel timed by the same protocol (flush, blocking
    # spin, events). In the second session cold - kernel was 2.7 us at 8192x4096 and 2.9 us at
    # 32768x4096: a constant of about this size would explain it (and put any kernel under ~90 us
    # outside a 3% agreement however the L2 is flushed)
    from assay.measure import timing

    def empty() -> None:
        torch.cuda._sleep(1)

    print("empty kernel | flush | cold median us | p10 us | p90 us")
    for flush in ("write", "read"):
        fl = timing.Flusher("cuda", flush)
        blk = timing.block_for(empty, [[]], "cuda")
        t, _, _ = timing.cold_samples(empty, [[]], 200, "cuda", fl, block_s=blk)
        t.sort()
        print(f"_sleep(1) | {flush} | {us(t[len(t) // 2])} | {us(t[len(t) // 10])} | {us(t[9 * len(t) // 10])}",
              flush=True)


def item_c() -> None:
    print("\n## c. a ~3% slower variant (y = 2x on 2^26 floats, plus a 3% scratch copy)")
    task = load_task(FIX / "scale_task.py")
    same = candidate_file("scale_same", OPS)
    slower = candidate_file("scale_slower", OPS + "\n_orig_scale = scale\n\ndef scale(x):\n    y = _orig_scale(x)\n"
                            "    scale_3pct_slower_tail(x)\n    return y\n\n"
                            "def scale_3pct_slower_tail(x):\n    k = max(1, int(x.numel() * 0.03))\n"
                            "    if k not in _scratch:\n        _scratch[k] = (torch.empty(k, device=x.device), torch.empty(k, device=x.device))\n"
                            "    s, d = _scratch[k]\n    _copy_kernel[(triton.cdiv(k, 4096),)](s, d, k, BLOCK=4096)\n")
    print("candidate | median us | baseline us | speedup | 95% CI | call")
    for name, path in (("identical", same), ("3% slower", slower)):
        s = time_it(task, path, max_time=3.0)["evidence"]["shapes"][0]
        sp = s["speedup"]["eager"]
        print(f"{name} | {us(s['candidate']['median'])} | {us(s['baselines']['eager']['median'])} | "
              f"{sp['estimate']:.4f} | [{sp['lo']:.4f}, {sp['hi']:.4f}] | {sp['call']}")


def item_d() -> None:
    print("\n## d. cheats get no speedup (full `assay check`, softmax task)")
    print("candidate | accepted | reasons | timing speedup vs eager")
    task = ROOT / "examples" / "softmax_task.py"
    for name in ("softmax_sidestream_cheat", "softmax_pointer_cache_cheat", "softmax_helperstream_ok"):
        v = check(ROOT / "tests" / "gpu" / "candidates" / f"{name}.py", task, device="cuda", time_budget=10,
                  cache_dir=CACHE)
        t = v.stage("timing")
        sp = (t.evidence.get("geomean_speedup") or {}).get("eager") if t else None
        print(f"{name} | {v.accepted} | {'; '.join(f'{r.category.value}: {r.message[:90]}' for r in v.reasons) or '-'} | "
              f"{'-' if sp is None else f'{sp:.3f}'}")


def item_e() -> None:
    print("\n## e. a copy kernel's achieved bandwidth vs the measured ceiling (2^27 floats = 512 MiB in, 512 MiB out)")
    task = load_task(FIX / "copy_task.py")
    st = time_it(task, candidate_file("copy_cand", OPS), max_time=3.0)
    s = st["evidence"]["shapes"][0]
    ceil = st["evidence"]["ceilings"]["copy_bandwidth"]
    bw = s["roofline"]["bytes"] / s["candidate"]["median"]
    print(f"bytes {s['roofline']['bytes']} | median {us(s['candidate']['median'])} us | achieved {bw / 1e12:.3f} TB/s | "
          f"ceiling {ceil / 1e12:.3f} TB/s | fraction {bw / ceil:.3f} | roofline fraction {s['roofline']['fraction']:.3f}")


def item_f() -> None:
    print("\n## f. eager vs torch.compile vs Triton softmax (fp32), speedup of the Triton kernel with 95% CI")
    def softmax(x):
        return torch.softmax(x, dim=-1)
    shapes = [(4096, 4096), (16384, 1024), (2048, 8192)]
    task = Task(name="softmax", reference=softmax, dims={"M": Dim(1, 65536), "N": Dim(1, 8192)},
                inputs=[Input("x", ("M", "N"))], workloads=[Workload({"M": m, "N": n}) for m, n in shapes])
    st = time_it(task, ROOT / "examples" / "softmax_triton.py", baselines=("eager", "compile"), max_time=3.0)
    print("shape | triton us | eager us | compile us | vs eager [CI] call | vs compile [CI] call | roofline fraction")
    for s in st["evidence"]["shapes"]:
        e, c = s["speedup"]["eager"], s["speedup"]["compile"]
        print(f"{s['dims']['M']}x{s['dims']['N']} | {us(s['candidate']['median'])} | {us(s['baselines']['eager']['median'])} | "
              f"{us(s['baselines']['compile']['median'])} | {e['estimate']:.3f} [{e['lo']:.3f}, {e['hi']:.3f}] {e['call']} | "
              f"{c['estimate']:.3f} [{c['lo']:.3f}, {c['hi']:.3f}] {c['call']} | {s['roofline']['fraction']:.3f}")
    print("compile warm-up (compile time, excluded from kernel time):",
          [round(s["warmup_s"].get("compile", 0), 2) for s in st["evidence"]["shapes"]], "s")
    print("geomean speedup:", json.dumps(st["evidence"].get("geomean_speedup")))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="a,b,c,d,e,f")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("measure_evidence needs a CUDA GPU")
    print(f"device: {torch.cuda.get_device_name(0)}  torch {torch.__version__}")
    for k in args.only.split(","):
        globals()[f"item_{k.strip()}"]()


if __name__ == "__main__":
    main()
