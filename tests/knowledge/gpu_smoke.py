"""GPU smoke run of the knowledge base (not collected by pytest; needs CUDA and compiled Triton).

1. every (template, task file) pair of test_kernels.CHECKS through the real evaluator on cuda;
2. the same tasks scaled to GPU sizes (and bfloat16 / float16 where the task allows), evaluator on cuda;
3. a rough timing of each template's default config against torch eager at one GPU-size shape.

``python tests/knowledge/gpu_smoke.py [--out DIR] [--only NAME ...]`` prints one line per result and
writes results.json under DIR.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import sys
import time
import traceback
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch

import assay
from assay.evaluate import check
from assay.knowledge import match
from assay.task import load_task

HERE = Path(__file__).parent
TASKS = HERE / "tasks"
ROOT = HERE.parent.parent

CHECKS = [
    ("softmax", "softmax"), ("softmax_looped", "softmax_long"), ("log_softmax", "log_softmax"),
    ("log_softmax_looped", "log_softmax_long"), ("rmsnorm", "rmsnorm"), ("layernorm", "layernorm"),
    ("row_sum", "row_sum"), ("row_mean", "row_mean"), ("row_max", "row_max"), ("gelu_mul", "gelu_mul"),
    ("silu_mul", "silu_mul"), ("relu", "relu"), ("swish", "swish"), ("matmul_bias_relu", "matmul_bias_relu"),
    ("matmul_bias_relu", "linear_relu"), ("softmax", "softmax_module"),
]
BIG = {"M": (1, 4096, 2048), "N": (1, 16384, 4000), "K": (1, 4096, 1000)}
BIG_MM = {"M": (1, 2048, 1024), "N": (1, 2048, 768), "K": (1, 2048, 1000)}
DTYPES = {"softmax": ["float32", "bfloat16"], "log_softmax": ["float32", "float16"], "rmsnorm": ["float32", "bfloat16"],
          "layernorm": ["float32", "float16"], "row_sum": ["float32", "bfloat16"], "gelu_mul": ["float32", "bfloat16"],
          "matmul_bias_relu": ["float32", "bfloat16"]}


def scaled(task: assay.Task, task_file: str) -> assay.Task:
    table = BIG_MM if "K" in task.dims else BIG
    dims = {k: assay.Dim(table[k][0], table[k][1]) for k in task.dims}
    work = [assay.Workload({k: table[k][2] for k in task.dims})]
    return dataclasses.replace(task, name=task.name + "-gpu", dims=dims, workloads=work,
                               dtypes=DTYPES.get(task_file, task.dtypes))


def evaluate(template: str, task: assay.Task, out: Path, budget: float) -> dict[str, Any]:
    t0 = time.time()
    try:
        bound = [t for t in match(task) if t.name == template]
        if not bound:
            return {"ok": False, "error": "not matched"}
        t = bound[0]
        cand = out / f"{task.name}__{template}.py"
        cand.write_text(t.render(task.entry_name, t.default_params()))
        v = check(cand, task, device="cuda", time_budget=budget, timing=False)
        corr = v.stage("correctness")
        return {"ok": v.accepted, "label": v.candidate.get("label"),
                "reasons": [f"{r.category.value}: {r.message}" for r in v.reasons],
                "ran": corr.evidence.get("ran") if corr and corr.evidence else None,
                "max_norm_err": corr.evidence.get("max_norm_err") if corr and corr.evidence else None,
                "seconds": round(time.time() - t0, 1)}
    except Exception as e:
        return {"ok": False, "error": f"{type(e).__name__}: {e}", "tb": traceback.format_exc()[-2000:]}


def bench(template: str, task: assay.Task, out: Path) -> dict[str, Any]:
    """Default config vs torch eager at the scaled workload, float32 (triton.testing.do_bench, ms)."""
    import triton.testing

    from assay.verify.cases import Case
    from assay.verify.inputs import make_inputs

    t = [t for t in match(task) if t.name == template][0]
    path = out / f"bench_{uuid.uuid4().hex[:6]}.py"
    path.write_text(t.render(task.entry_name, t.default_params()))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    fn = getattr(mod, task.entry_name)
    dims = dict(task.workloads[0].dims)
    case = Case("bench", dims, "float32", "normal", tuple("contiguous" for _ in task.inputs), seed=1)
    xs = [x.cuda() for x in make_inputs(task, case)]
    ref = task.reference if not task.is_module else task.reference(*task.init_inputs(dims)).cuda()
    if task.is_module:
        fn = fn(*task.init_inputs(dims))
    ms_k = triton.testing.do_bench(lambda: fn(*xs))
    ms_t = triton.testing.do_bench(lambda: ref(*xs))
    nbytes = sum(x.numel() * x.element_size() for x in xs)
    return {"dims": dims, "kernel_ms": round(ms_k, 4), "torch_ms": round(ms_t, 4), "speedup": round(ms_t / ms_k, 2),
            "input_GBps": round(nbytes / ms_k / 1e6, 1)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="/tmp/kb-gpu")
    ap.add_argument("--only", nargs="*", default=[])
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--phases", default="123")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    cands = out / "cands"
    cands.mkdir(exist_ok=True)
    pairs = [p for p in CHECKS if not a.only or p[0] in a.only or p[1] in a.only]
    results: dict[str, Any] = {"torch": torch.__version__, "device": torch.cuda.get_device_name()}
    jobs = []
    for tmpl, tf in pairs:
        task = load_task(TASKS / f"{tf}.py")
        if "1" in a.phases:
            jobs.append((f"small/{tmpl}/{tf}", tmpl, task, 4.0))
        if "2" in a.phases:
            jobs.append((f"gpu/{tmpl}/{tf}", tmpl, scaled(task, tf), 8.0))
    t0 = time.time()
    with ThreadPoolExecutor(a.workers) as ex:
        futs = {key: ex.submit(evaluate, tmpl, task, cands, b) for key, tmpl, task, b in jobs}
        for key, f in futs.items():
            r = f.result()
            results[key] = r
            print(key, json.dumps(r)[:1500], flush=True)
    print(f"evaluator phases: {time.time() - t0:.0f} s", flush=True)
    if "3" in a.phases:
        for tmpl, tf in pairs:
            key = f"bench/{tmpl}/{tf}"
            try:
                results[key] = bench(tmpl, scaled(load_task(TASKS / f"{tf}.py"), tf), cands)
            except Exception as e:
                results[key] = {"error": f"{type(e).__name__}: {e}"}
            print(key, json.dumps(results[key]), flush=True)
    (out / "results.json").write_text(json.dumps(results, indent=1))
    bad = [k for k, v in results.items() if isinstance(v, dict) and v.get("ok") is False]
    print("FAILED:", bad if bad else "none")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
