"""The command line, run as a real subprocess: exit codes, exact JSON on stdout, one-line errors."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

TASK = '''
import torch
import assay

def scale(x):
    return x * 3.0

task = assay.Task(name="scale", reference=scale, dims={"N": assay.Dim(1, 300)},
                  inputs=[assay.Input("x", ("N",))], workloads=[assay.Workload({"N": 100})])
'''
GOOD = "def scale(x):\n    return x * 3.0\n"
BAD = "def scale(x):\n    return x * 3.001\n"


@pytest.fixture
def env(tmp_path):
    (tmp_path / "task.py").write_text(TASK)
    (tmp_path / "good.py").write_text(GOOD)
    (tmp_path / "bad.py").write_text(BAD)
    return {**os.environ, "ASSAY_DB": f"sqlite:///{tmp_path}/store.db", "ASSAY_CACHE_DIR": str(tmp_path / "cache"), "COLUMNS": "200"}


def run(args, env, cwd):
    return subprocess.run([sys.executable, "-m", "assay.cli", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=300)


def test_accepted_exit_0_json_is_exactly_the_verdict(env, tmp_path):
    r = run(["check", "good.py", "--task", "task.py", "--device", "cpu", "--json", "--time-budget", "3",
             "--allow-primitive"], env, tmp_path)
    assert r.returncode == 0, r.stderr
    v = json.loads(r.stdout)  # stdout holds nothing but the verdict
    assert v["accepted"] is True and v["schema_version"] == 1
    assert v["candidate"]["label"] == "existing primitive"
    assert [s["name"] for s in v["stages"]] == ["static_scan", "build", "correctness", "integrity", "timing"]
    timing = v["stages"][4]["evidence"]
    assert timing["timer"] == "cpu perf_counter"
    shape = timing["shapes"][0]
    assert shape["candidate"]["n"] >= 10 and shape["speedup"]["eager"]["call"] in ("faster", "slower", "SAME")
    assert shape["speedup"]["eager"]["lo"] <= shape["speedup"]["eager"]["estimate"] <= shape["speedup"]["eager"]["hi"]
    assert v["environment"]["torch"]


def test_plain_torch_is_rejected_by_default_as_existing_primitive(env, tmp_path):
    r = run(["check", "good.py", "--task", "task.py", "--device", "cpu", "--json", "--time-budget", "2"], env, tmp_path)
    assert r.returncode == 1
    v = json.loads(r.stdout)
    assert v["reasons"][0]["category"] == "integrity" and "no custom kernel" in v["reasons"][0]["message"]


def test_rejected_exit_1_with_minimal_failing_case(env, tmp_path):
    r = run(["check", "bad.py", "--task", "task.py", "--device", "cpu", "--json", "--time-budget", "3"], env, tmp_path)
    assert r.returncode == 1
    v = json.loads(r.stdout)
    assert v["reasons"][0]["category"] == "correctness"
    ev = next(s for s in v["stages"] if s["name"] == "correctness")["findings"][0]["evidence"]
    assert ev["dims"]["N"] <= 2 and ev["seed"] > 0 and ev["case"]
    # the token replays that one case
    r2 = run(["check", "bad.py", "--task", "task.py", "--device", "cpu", "--json", "--replay", ev["case"]], env, tmp_path)
    assert r2.returncode == 1
    assert json.loads(r2.stdout)["stages"][2]["evidence"]["ran"] == 1


@pytest.mark.parametrize("args,needle", [
    (["check", "missing.py", "--task", "task.py"], "missing.py: no such candidate file"),
    (["check", "good.py", "--task", "nothere.py"], "nothere.py: no such task file"),
    (["check", "good.py", "--task", "broken.py"], "broken.py: syntax error at line 1"),
    (["check", "noentry.py", "--task", "task.py"], "noentry.py: defines neither `scale` nor `ModelNew`"),
    (["check", "good.py", "--task", "task.py", "--device", "tpu"], "--device must be cpu or cuda"),
    (["check", "good.py", "--task", "task.py", "--baseline", "cublas"], "--baseline must be eager, compile"),
])
def test_user_errors_exit_2_one_line_no_traceback(env, tmp_path, args, needle):
    (tmp_path / "broken.py").write_text("task = (\n")
    (tmp_path / "noentry.py").write_text("def other(x):\n    return x\n")
    r = run(args, env, tmp_path)
    assert r.returncode == 2
    assert needle in r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_history_lists_recorded_checks(env, tmp_path):
    run(["check", "good.py", "--task", "task.py", "--device", "cpu", "--time-budget", "2", "--allow-primitive",
         "--no-timing"], env, tmp_path)
    r = run(["history"], env, tmp_path)
    assert r.returncode == 0 and "scale" in r.stdout and "accepted" in r.stdout
    r = run(["show", "1"], env, tmp_path)
    assert json.loads(r.stdout)["accepted"] is True


def test_profile_on_cpu_is_a_skipped_stage_with_its_reason(env, tmp_path):
    r = run(["check", "good.py", "--task", "task.py", "--device", "cpu", "--json", "--time-budget", "2",
             "--allow-primitive", "--no-timing", "--profile"], env, tmp_path)
    assert r.returncode == 0, r.stderr
    v = json.loads(r.stdout)
    prof = v["stages"][-1]
    assert prof["name"] == "profile" and prof["status"] == "skipped" and "CUDA" in prof["evidence"]["reason"]
