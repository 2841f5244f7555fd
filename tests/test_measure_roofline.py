import json
import math
import time

import pytest
import torch

from assay.measure import roofline as rl
from assay.measure.roofline import (
    Ceilings,
    count_flops,
    floor_time,
    load_or_measure,
    measure_ceilings,
    min_bytes,
    plausibility,
    roofline_fraction,
)

CEIL = Ceilings(device="test", copy_bandwidth=1e12, matmul_flops={"bfloat16": 1e15, "float32": 5e13})


# ----------------------------------------------------------------------------- work


def test_count_flops_matmul():
    m, k, n = 64, 32, 48
    a, b = torch.randn(m, k), torch.randn(k, n)
    assert count_flops(torch.mm, [a, b]) == 2 * m * n * k
    assert count_flops(lambda x, y: x @ y, (a, b)) == 2 * m * n * k
    ab, bb = torch.randn(3, m, k), torch.randn(3, k, n)
    assert count_flops(torch.bmm, [ab, bb]) == 3 * 2 * m * n * k


def test_count_flops_zero_for_elementwise():
    x = torch.randn(1000)
    assert count_flops(torch.relu, [x]) == 0
    assert count_flops(lambda t: t * 2 + 1, [x]) == 0


def test_count_flops_without_autograd_graph():
    a = torch.randn(8, 8, requires_grad=True)
    assert count_flops(lambda t: (t @ t).sum(), [a]) == 2 * 8**3


def test_min_bytes_contiguous():
    a = torch.empty(100, 50)  # 20000 B
    b = torch.empty(50, dtype=torch.float16)  # 100 B
    out = torch.empty(100, 50, dtype=torch.bfloat16)  # 10000 B
    assert min_bytes([a, b], out) == 20000 + 100 + 10000
    assert min_bytes((a, 3, "x"), {"y": out, "z": [out]}) == 20000 + 10000  # non-tensors ignored, same view once


def test_min_bytes_expanded_and_strided_inputs():
    row = torch.empty(1, 64)
    expanded = row.expand(1000, 64)  # stride 0: 64 floats of storage
    assert expanded.numel() == 64000
    assert min_bytes([expanded], []) == 64 * 4
    assert min_bytes([torch.empty(()).expand(10, 10)], []) == 4
    assert min_bytes([torch.empty(30, 20).t()], []) == 600 * 4  # transposed: still dense
    assert min_bytes([torch.empty(100, 100)[:, :10]], []) == 1000 * 4  # slice: only what it addresses
    windows = torch.arange(10.0).unfold(0, 4, 1)  # overlapping windows: 7x4 view of 10 floats
    assert min_bytes([windows], []) == 10 * 4
    assert min_bytes([torch.empty(0, 5)], []) == 0


# ----------------------------------------------------------------------------- floor


def test_floor_time_picks_the_max():
    mem_bound = floor_time(flops=1e9, bytes_=1e9, ceilings=CEIL, dtype_name="bfloat16")
    assert mem_bound == pytest.approx(1e9 / 1e12)  # 1 ms of traffic vs 1 us of math
    compute_bound = floor_time(flops=1e13, bytes_=1e6, ceilings=CEIL, dtype_name="bfloat16")
    assert compute_bound == pytest.approx(1e13 / 1e15)
    assert floor_time(1e13, 1e6, CEIL, "float32") == pytest.approx(1e13 / 5e13)


def test_floor_time_dtype_names_and_fallback():
    assert floor_time(1e13, 0, CEIL, torch.bfloat16) == floor_time(1e13, 0, CEIL, "bf16")
    assert floor_time(1e13, 0, CEIL, "torch.bfloat16") == pytest.approx(1e-2)
    assert floor_time(1e13, 0, CEIL, "float64") == pytest.approx(1e13 / 5e13)  # fp32 rate as fallback
    assert floor_time(1e13, 1e6, CEIL, "float8_e4m3fn") == pytest.approx(1e6 / 1e12)  # no lower bound known
    with pytest.raises(ValueError):
        floor_time(-1, 0, CEIL, "float32")


def test_roofline_fraction():
    assert roofline_fraction(1e-3, 2e-3) == pytest.approx(0.5)
    assert roofline_fraction(1e-3, 1e-3) == pytest.approx(1.0)
    with pytest.raises(ValueError):
        roofline_fraction(1e-3, 0.0)


def test_plausibility():
    floor = 1e-3
    ok, msg = plausibility(floor, floor / 2)
    assert not ok and "faster than the hardware allows" in msg
    ok, msg = plausibility(floor, floor * 1.05)
    assert ok, msg
    assert plausibility(floor, floor * 0.95)[0]  # within the 10% tolerance
    assert not plausibility(floor, floor * 0.85)[0]
    assert plausibility(floor, floor * 0.85, tolerance=0.2)[0]
    assert not plausibility(floor, 0.0)[0]


# ----------------------------------------------------------------------------- ceilings


def test_measure_ceilings_cpu_small():
    t0 = time.perf_counter()
    c = measure_ceilings("cpu", copy_bytes=8 * 2**20, matmul_n=256, reps=3, warmup=1)
    assert time.perf_counter() - t0 < 5
    assert c.device.startswith("cpu")
    assert c.torch_version == torch.__version__
    assert math.isfinite(c.copy_bandwidth) and c.copy_bandwidth > 0
    assert set(c.matmul_flops) == {"float32"}
    assert all(math.isfinite(v) and v > 0 for v in c.matmul_flops.values())


def test_ceilings_json_roundtrip():
    c = Ceilings(device="NVIDIA H200", copy_bandwidth=4.1e12, matmul_flops={"bfloat16": 7e14, "float32": 5e13},
                 torch_version="2.13.0", l2_bytes=50 * 2**20)
    assert Ceilings.from_json(c.to_json()) == c
    assert Ceilings.from_json(json.dumps({"device": "x", "copy_bandwidth": 1})) == Ceilings("x", 1.0)


def test_load_or_measure_caches_by_device_and_torch_version(tmp_path):
    calls = []

    def fake_measure(device):
        calls.append(device)
        return Ceilings(device=rl.device_name(device), copy_bandwidth=1e10, matmul_flops={"float32": 1e11})

    path = tmp_path / "sub" / "ceilings.json"
    first = load_or_measure("cpu", path, measure=fake_measure)
    second = load_or_measure("cpu", path, measure=fake_measure)
    assert first == second and len(calls) == 1
    cache = json.loads(path.read_text())
    (key,) = cache
    assert rl.device_name("cpu") in key and torch.__version__ in key

    cache = {f"{rl.device_name('cpu')} | torch 0.0.1": cache[key]}  # other torch version: re-measure
    path.write_text(json.dumps(cache))
    load_or_measure("cpu", path, measure=fake_measure)
    assert len(calls) == 2 and len(json.loads(path.read_text())) == 2

    path.write_text("{not json")  # corrupt cache: re-measure and rewrite
    assert load_or_measure("cpu", path, measure=fake_measure) == first
    assert len(calls) == 3 and len(json.loads(path.read_text())) == 1


def test_tf32_setting_restored():
    m = torch.backends.cuda.matmul
    before = (m.allow_tf32, m.fp32_precision)
    with rl._tf32_off():
        assert m.allow_tf32 is False
    assert (m.allow_tf32, m.fp32_precision) == before
    m.allow_tf32 = True
    try:
        with rl._tf32_off():
            assert m.allow_tf32 is False
        assert m.allow_tf32 is True
    finally:
        m.allow_tf32 = before[0]
        m.fp32_precision = before[1]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_measure_ceilings_cuda():
    c = measure_ceilings("cuda", copy_bytes=256 * 2**20, matmul_n=4096, reps=5)
    assert c.copy_bandwidth > 1e11
    assert set(c.matmul_flops) == {"bfloat16", "float16", "float32"}
    assert c.matmul_flops["bfloat16"] > c.matmul_flops["float32"]  # TF32 off makes fp32 the slow path
