"""The profile stage: ncu CSV parsing, the bottleneck class, the launcher seam, CPU behaviour.

The ncu output below is written in the layouts `ncu --csv --page raw` and `ncu --csv` (details
page) print; a real ncu run needs a GPU (tests/gpu/test_gpu_gates.py::test_profile_stage...).
"""

import secrets
from pathlib import Path

import torch

from assay.measure import profile as prof
from assay.sandbox.process import Worker
from assay.task import load_task
from assay.verdict import Status

ROOT = Path(__file__).parents[1]
LS = prof.STALL_METRIC.format("long_scoreboard")
BAR = prof.STALL_METRIC.format("barrier")

RAW = "\n".join([
    "==PROF== Connected to process 4242 (/usr/bin/python3.12)",
    "==PROF== Profiling \"_softmax_kernel\": 0%....50%....100% - 9 passes",
    ",".join(f'"{c}"' for c in ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream",
                                 "Block Size", "Grid Size", "Device", "CC", prof.DRAM, prof.DURATION, prof.SM,
                                 prof.OCCUPANCY, LS, BAR]),
    ",".join(f'"{c}"' for c in ["", "", "", "", "", "", "", "", "", "", "", "%", "usecond", "%", "%", "ratio", "ratio"]),
    ",".join(f'"{c}"' for c in ["0", "4242", "python3.12", "h", "_softmax_kernel", "1", "7", "(128, 1, 1)",
                                 "(16384, 1, 1)", "0", "9.0", "88.5", "132.70", "31.2", "77.0", "6.1", "0.4"]),
    ",".join(f'"{c}"' for c in ["1", "4242", "python3.12", "h", "small_kernel", "1", "7", "(32, 1, 1)",
                                 "(1, 1, 1)", "0", "9.0", "2.0", "3.30", "1.0", "6.0", "0.1", "9.0"]),
    "==PROF== Disconnected from process 4242",
])

DETAILS = "\n".join([
    '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
    '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"',
    *(f'"0","7","python3","h","gemm_kernel","1","7","(256, 1, 1)","(132, 1, 1)","0","9.0","Command line profiler metrics",'
      f'"{m}","{u}","{v}"' for m, u, v in [(prof.DURATION, "msecond", "1.25"), (prof.DRAM, "%", "22.0"),
                                            (prof.SM, "%", "81.0"), (prof.OCCUPANCY, "%", "40.0")]),
])


def test_raw_page_is_parsed_with_units_and_weighted_by_duration():
    ks = prof.parse_csv(RAW)
    assert [k.name for k in ks] == ["_softmax_kernel", "small_kernel"]
    assert abs(ks[0].duration_s - 132.7e-6) < 1e-12 and ks[0].dram_pct == 88.5 and ks[0].stalls["long_scoreboard"] == 6.1
    s = prof.summarize(ks)
    assert s["kernels"] == 2 and s["bottleneck"] == "memory"
    # duration-weighted: the 133 us kernel dominates the 3 us one
    assert 85 < s["dram_pct"] < 88.5
    assert s["top_stalls"][0] == "long_scoreboard"


def test_details_page_is_parsed_and_a_compute_bound_kernel_is_classed_compute():
    (k,) = prof.parse_csv(DETAILS)
    assert k.name == "gemm_kernel" and abs(k.duration_s - 1.25e-3) < 1e-12 and k.sm_pct == 81.0
    assert prof.summarize([k])["bottleneck"] == "compute"


def test_classes_follow_the_speed_of_light_thresholds():
    assert prof.classify(85, 30) == "memory"
    assert prof.classify(30, 85) == "compute"
    assert prof.classify(70, 75) == "compute"
    assert prof.classify(20, 25) == "latency"
    assert prof.summarize([]) == {"kernels": 0, "bottleneck": None}


def test_garbage_gives_no_kernels():
    assert prof.parse_csv("==ERROR== Failed to find metric foo\n") == []
    assert prof.parse_csv('"ID","Kernel Name"\n"0","k"\n') == []  # no metrics: not a profile


def test_profile_stage_on_cpu_is_skipped_with_a_reason():
    task = load_task(ROOT / "examples" / "softmax_small_task.py")
    st = prof.run_profile(task, (ROOT / "examples" / "softmax_triton.py").read_text(), "softmax", "cpu",
                          secrets.token_bytes(8), None)
    assert st.status is Status.skipped and "CUDA" in st.evidence["reason"]


def test_launcher_seam_runs_the_worker_behind_a_wrapper(tmp_path):
    """The profile stage puts ncu in front of python inside the sandbox; the same seam with `env`
    shows the worker really runs behind the wrapper (the variable exists only through it)."""
    cand = tmp_path / "c.py"
    cand.write_text("import os, torch\n\ndef f(x):\n    return x + float(os.environ.get('ASSAY_WRAP_PROBE', '0'))\n")
    w = Worker(device="cpu")
    w.wrap = ("env", "ASSAY_WRAP_PROBE=5")
    w.start()
    try:
        staged = w.stage_file(cand)
        assert w.request({"op": "load", "path": str(staged), "entry": "f", "device": "cpu"}, 120)["ok"]
        r = w.request({"op": "run", "inputs": [torch.zeros(3)]}, 60)
        assert r["ok"] and torch.equal(r["outputs"][0], torch.full((3,), 5.0))
    finally:
        w.close()


def test_the_bottleneck_class_reaches_the_generator_feedback():
    from assay.search.feedback import summarize
    from assay.verdict import StageResult, Verdict

    st = StageResult(name="profile", status=Status.passed,
                     evidence={"dims": {"M": 4}, **prof.summarize(prof.parse_csv(RAW))})
    v = Verdict(accepted=True, reasons=[], task={}, candidate={}, device="cuda", stages=[st], environment={},
                seconds=1.0)
    text = summarize(v)
    assert "profile {'M': 4}: memory-bound (DRAM 8" in text and "long_scoreboard" in text


def test_without_ncu_the_class_comes_from_the_roofline_of_the_timing_stage():
    ev = {"ceilings": {"copy_bandwidth": 4e12, "matmul_flops": {"float32": 5e13, "bfloat16": 8e14}},
          "shapes": [{"dims": {"M": 1}, "dtype": "float32", "weight": 1.0, "candidate": {"median": 100e-6},
                      "roofline": {"bytes": 3.6e8, "flops": 1e8}},  # 3.6 TB/s: 90% of the copy ceiling
                     {"dims": {"M": 2}, "dtype": "bfloat16", "weight": 1.0, "candidate": {"median": 1e-3},
                      "roofline": {"bytes": 4e8, "flops": 6e11}}]}  # 0.4 TB/s (10%), 600 TFLOP/s (75%)
    both = prof.roofline_bottleneck(ev)
    assert abs(both["dram_pct"] - 50.0) < 1e-9 and abs(both["sm_pct"] - 38.5) < 1e-6  # (2% + 75%) / 2
    assert both["bottleneck"] == "latency" and "roofline" in both["source"]
    mem_only = prof.roofline_bottleneck({**ev, "shapes": ev["shapes"][:1]})
    assert mem_only["bottleneck"] == "memory"
    comp_only = prof.roofline_bottleneck({**ev, "shapes": ev["shapes"][1:]})
    assert comp_only["bottleneck"] == "compute"
    assert prof.roofline_bottleneck({"shapes": []}) == {}
