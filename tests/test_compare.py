import torch

from assay.verify import compare as cmp


def test_all_zeros_fail_tiny_outputs_via_norm_check():
    ref = torch.softmax(torch.randn(8, 4096, dtype=torch.float64), -1)  # every value ~2.4e-4
    tol = cmp.calibrate(torch.float32, ref, ref.float())
    c = cmp.compare(torch.zeros(8, 4096), ref, tol)
    assert not c.ok
    assert "relative norm error" in c.message


def test_summation_order_noise_passes():
    x = torch.randn(16, 3000, dtype=torch.float64)
    ref = x.sum(-1)
    other = x.float().flip(-1).cumsum(-1)[:, -1]  # different order, fp32
    tol = cmp.calibrate(torch.float32, ref, x.float().sum(-1))
    assert cmp.compare(other, ref, tol).ok


def test_low_precision_accumulation_fails_fp32():
    x = torch.randn(16, 3000, dtype=torch.float64)
    tol = cmp.calibrate(torch.float32, x.sum(-1), x.float().sum(-1))
    bad = x.to(torch.bfloat16).sum(-1).float()
    assert not cmp.compare(bad, x.sum(-1), tol).ok


def test_nan_and_inf_must_match_positions():
    ref = torch.tensor([1.0, float("nan"), float("inf"), -float("inf")], dtype=torch.float64)
    tol = cmp.fixed(torch.float32, 1e-5, 1e-5)
    assert cmp.compare(ref.float(), ref, tol).ok
    assert not cmp.compare(torch.tensor([1.0, 0.0, float("inf"), -float("inf")]), ref, tol).ok
    assert not cmp.compare(torch.tensor([1.0, float("nan"), float("inf"), float("inf")]), ref, tol).ok
    assert not cmp.compare(torch.tensor([float("nan"), float("nan"), float("inf"), -float("inf")]), ref, tol).ok


def test_exact_dtypes_compare_exactly():
    ref = torch.tensor([1, 2, 3])
    tol = cmp.calibrate(torch.int64, ref, ref)
    assert cmp.compare(torch.tensor([1, 2, 3]), ref, tol).ok
    assert not cmp.compare(torch.tensor([1, 2, 4]), ref, tol).ok


def test_locate_names_the_last_columns():
    mask = torch.zeros(64, 1000, dtype=torch.bool)
    mask[:, -24:] = True
    assert cmp.locate(mask).startswith("last 24 of 1000 columns, in all 64 rows")
    mask = torch.zeros(64, 1000, dtype=torch.bool)
    mask[3, 10:20] = True
    assert "columns 10..19 of 1000" in cmp.locate(mask) and "in 1 of 64 rows" in cmp.locate(mask)


def test_overflow_to_inf_in_the_output_dtype_is_correct():
    ref = torch.tensor([-3356298.0, 1.0], dtype=torch.float64)  # beyond float16's range (65504)
    tol = cmp.fixed(torch.float16, 1e-3, 1e-3)
    assert cmp.compare(torch.tensor([-float("inf"), 1.0], dtype=torch.float16), ref, tol).ok
    assert not cmp.compare(torch.tensor([float("inf"), 1.0], dtype=torch.float16), ref, tol).ok


def test_a_legitimate_summation_order_under_cancellation_passes_but_zeros_do_not():
    """Seen in a full run: a Triton row sum of one row of 200 normals whose true sum is ~0.06
    (cancellation) was 8.5x further from fp64 than torch's own fp32 sum and was rejected by the
    norm check. The norm factor (K_NORM) leaves room for another order; zeros stay rejected."""
    import torch

    from assay.verify import compare as cmp

    ref64 = torch.tensor([0.0597], dtype=torch.float64)
    ref32 = (ref64 + 1.0e-7).float()  # torch's own fp32 result: relative error ~1.7e-6
    tol = cmp.calibrate(torch.float32, ref64, ref32)
    other_order = (ref64 + 8.12e-7).float()  # relative error ~1.36e-5 (8x torch's)
    assert cmp.compare(other_order, ref64, tol).ok
    zeros = torch.zeros(1)
    assert not cmp.compare(zeros, ref64, tol).ok
    wrong = (ref64 * 1.001).float()  # 1e-3 relative: reduced-precision accumulation territory
    assert not cmp.compare(wrong, ref64, tol).ok


def test_fp64_output_within_a_first_call_exp_anomaly_passes_and_a_real_error_does_not():
    """torch 2.13's CPU exp gave a fresh process's first fp64 call 3.3e-9 relative error: the
    fp64 norm floor (1e-7, its rtol floor) accepts that; an error of 1e-6 is still rejected."""
    from assay.verify.compare import calibrate, compare

    ref = torch.rand(64, 64, dtype=torch.float64, generator=torch.Generator().manual_seed(0)) + 0.5
    tol = calibrate(torch.float64, ref, ref.clone())
    assert compare(ref * (1 + 3.3e-9), ref, tol).ok
    assert not compare(ref * (1 + 1e-6), ref, tol).ok
