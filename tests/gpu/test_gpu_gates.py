"""GPU integrity gates and timing (run on the H200 through the device tool; skipped without CUDA)."""

from pathlib import Path

import pytest
import torch

from assay.evaluate import check
from assay.verdict import Category

pytestmark = pytest.mark.gpu
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

HERE = Path(__file__).parent / "candidates"
ROOT = Path(__file__).parents[2]
SOFTMAX = ROOT / "examples" / "softmax_task.py"


def test_side_stream_cheat_is_rejected_and_gets_no_speedup():
    v = check(HERE / "softmax_sidestream_cheat.py", SOFTMAX, device="cuda", time_budget=10, baselines=("eager",))
    assert not v.accepted
    assert Category.integrity in v.categories
    assert any("escapes the timed stream" in r.message or "changed after" in r.message for r in v.reasons)


def test_helper_stream_that_synchronizes_is_accepted():
    v = check(HERE / "softmax_helperstream_ok.py", SOFTMAX, device="cuda", time_budget=10, baselines=("eager",))
    assert v.accepted, v.reasons


def test_pointer_cache_cheat_is_rejected():
    v = check(HERE / "softmax_pointer_cache_cheat.py", SOFTMAX, device="cuda", time_budget=10, baselines=("eager",))
    assert not v.accepted
    assert v.categories & {Category.correctness, Category.integrity}


def test_timing_stage_carries_baselines_cis_roofline_and_environment():
    v = check(ROOT / "examples" / "softmax_triton.py", SOFTMAX, device="cuda", time_budget=10)
    assert v.accepted, v.reasons
    t = v.stage("timing").evidence
    assert t["timer"].startswith("cuda events") and t["l2_persisting"]
    for s in t["shapes"]:
        for name in ("eager", "compile", "compile:max-autotune-no-cudagraphs"):
            sp = s["speedup"][name]
            assert sp["lo"] <= sp["estimate"] <= sp["hi"] and sp["call"] in ("faster", "slower", "SAME")
        assert 0 < s["roofline"]["fraction"] <= 1.1
        assert s["candidate"]["n"] >= 10
        assert s["profiler_kernel_s"] is not None
    assert set(t["geomean_speedup"]) == {"eager", "compile", "compile:max-autotune-no-cudagraphs"}
    assert t["baseline_process"] == "worker" and not t["notes"]  # baselines timed by the same worker code
    assert t["clocks_start"] and v.environment["gpu"]


def test_time_below_the_roofline_floor_is_rejected_as_implausible():
    """Shrink the cached device ceilings a millionfold: every honest time is then 'faster than
    the hardware allows', and the plausibility gate must reject it."""
    import json

    from assay.config import default_cache_dir

    path = Path(default_cache_dir()) / "ceilings.json"
    check(ROOT / "examples" / "softmax_triton.py", SOFTMAX, device="cuda", time_budget=3, baselines=("eager",))  # ensures the cache
    saved = path.read_text()
    try:
        data = json.loads(saved)
        for c in data.values():
            c["copy_bandwidth"] /= 1e6
            c["matmul_flops"] = {k: v / 1e6 for k, v in c["matmul_flops"].items()}
        path.write_text(json.dumps(data))
        v = check(ROOT / "examples" / "softmax_triton.py", SOFTMAX, device="cuda", time_budget=3, baselines=("eager",))
        assert not v.accepted
        assert any("implausible" in r.message for r in v.reasons)
        assert all(r.category is Category.integrity for r in v.reasons)
    finally:
        path.write_text(saved)


def test_profile_stage_reports_speed_of_light_and_a_bottleneck_class():
    v = check(ROOT / "examples" / "softmax_triton.py", SOFTMAX, device="cuda", time_budget=5, timing=False,
              profile=True)
    assert v.accepted, v.reasons
    p = v.stage("profile")
    assert p.status.value == "passed", p.evidence
    e = p.evidence
    assert e["kernels"] >= 1 and e["duration_s"] > 0
    assert e["bottleneck"] in ("memory", "compute", "latency")
    assert 0 <= e["dram_pct"] <= 100 and 0 <= e["sm_pct"] <= 100
