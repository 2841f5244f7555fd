import math

import numpy as np
import pytest

from assay.measure.stats import (
    AdaptiveStop,
    SpeedupCI,
    Summary,
    drop_outliers,
    paired_speedup,
    summarize,
    weighted_geomean,
)


def _lognormal(seed: int, n: int, sigma: float, scale: float = 1e-3) -> np.ndarray:
    return scale * np.random.default_rng(seed).lognormal(0.0, sigma, n)


# ----------------------------------------------------------------------------- outliers / summary


def test_outlier_rule_removes_injected_10x_sample():
    x = _lognormal(0, 50, 0.01)
    x[17] *= 10
    kept, dropped = drop_outliers(x)
    assert dropped == 1
    assert kept.size == 49
    assert x[17] not in kept
    assert kept.max() < 2e-3


def test_outlier_rule_keeps_clean_samples_and_order():
    x = np.linspace(1.0, 2.0, 21)
    kept, dropped = drop_outliers(x)
    assert dropped == 0
    np.testing.assert_array_equal(kept, x)


def test_outlier_rule_never_keeps_fewer_than_five():
    x = [1.0, 1.0, 1.0, 1.0, 5.0, 9.0]  # IQR is 0: the fences would keep only the four 1.0s
    kept, dropped = drop_outliers(x)
    assert kept.size == 5 and dropped == 1
    assert 9.0 not in kept  # the most distant one goes first
    kept, dropped = drop_outliers([1.0, 100.0, 3.0])  # fewer than 5: nothing dropped
    assert kept.size == 3 and dropped == 0


def test_summarize_after_outlier_removal():
    x = _lognormal(1, 100, 0.02)
    clean = summarize(x)
    x_bad = x.copy()
    x_bad[0] = 1.0  # 1000x outlier
    s = summarize(x_bad)
    assert isinstance(s, Summary)
    assert s.n == 100 and s.n_outliers >= 1 and s.unit == "s"
    assert s.max == 1.0  # min/max stay raw: the outlier is visible
    assert s.mean < 1.1e-3  # ...but does not move the mean
    assert s.rel_stderr < 0.01
    assert abs(s.median - clean.median) / clean.median < 0.01
    assert s.p10 <= s.median <= s.p90
    assert s.iqr > 0
    assert s.rel_stderr == pytest.approx(np.std(x_bad[1:], ddof=1) / math.sqrt(99) / np.mean(x_bad[1:]), rel=0.3)


def test_summarize_rejects_bad_input():
    with pytest.raises(ValueError):
        summarize([])
    with pytest.raises(ValueError):
        summarize([1.0, float("nan")])
    with pytest.raises(ValueError):
        summarize([1.0, -1.0])
    assert math.isinf(summarize([1e-3]).rel_stderr)


# ----------------------------------------------------------------------------- adaptive stop


def test_adaptive_stop_converges_on_low_noise():
    stop = AdaptiveStop()
    for x in _lognormal(2, 100_000, 0.01, scale=1e-3):
        stop.add(x)
        if stop.done:
            break
    assert stop.done and stop.reason == "converged"
    assert stop.n >= 10
    assert stop.total >= 0.5  # min_time is honoured even though noise converged much earlier
    assert stop.total < 0.6
    assert stop.rel_stderr <= 0.005


def test_adaptive_stop_respects_min_samples():
    stop = AdaptiveStop(min_samples=10, min_time=0.0)
    for _ in range(9):
        stop.add(1e-3)
    assert not stop.done and stop.reason is None
    stop.add(1e-3)
    assert stop.done and stop.reason == "converged"


def test_adaptive_stop_hits_time_cap_on_noisy_samples():
    stop = AdaptiveStop()
    for x in _lognormal(3, 100_000, 1.0, scale=0.05):
        stop.add(x)
        if stop.done:
            break
    assert stop.done and stop.reason == "time cap"
    assert 15.0 <= stop.total < 16.0
    assert stop.rel_stderr > 0.005


def test_adaptive_stop_time_cap_uses_wall_clock():
    now = [0.0]
    stop = AdaptiveStop(clock=lambda: now[0])
    rng = np.random.default_rng(4)
    while not stop.done:
        now[0] += 1.0  # each run takes 1 s of wall time (e.g. long syncs) but times ~1 ms
        stop.add(1e-3 * rng.lognormal(0.0, 1.0))
    assert stop.reason == "time cap"
    assert stop.n == 15
    assert stop.total < 0.5


def test_adaptive_stop_summary_and_validation():
    stop = AdaptiveStop()
    for x in [1e-3, 2e-3, 3e-3]:
        stop.add(x)
    assert stop.summary().n == 3
    with pytest.raises(ValueError):
        stop.add(float("inf"))


# ----------------------------------------------------------------------------- speedup


def test_paired_speedup_same_distribution_is_same():
    r = paired_speedup(_lognormal(10, 200, 0.01), _lognormal(11, 200, 0.01))
    assert isinstance(r, SpeedupCI)
    assert r.call == "SAME" and r.n == 200
    assert r.lo <= r.estimate <= r.hi
    assert abs(r.estimate - 1) < 0.005


def test_paired_speedup_same_distribution_false_positive_rate():
    # noisier (5%): the noise floor cannot hide a false call, only the CI can
    calls = [paired_speedup(_lognormal(2 * s, 200, 0.05), _lognormal(2 * s + 1, 200, 0.05), n_boot=1000).call
             for s in range(20)]
    assert calls.count("SAME") >= 17  # nominal 95% coverage


def test_paired_speedup_detects_3pct_slower_with_1pct_noise():
    base = _lognormal(20, 200, 0.01)
    cand = 1.03 * _lognormal(21, 200, 0.01)
    r = paired_speedup(base, cand)
    assert r.call == "slower"
    assert r.hi < 1.0
    assert r.estimate == pytest.approx(1 / 1.03, abs=0.005)


def test_paired_speedup_detects_10pct_faster():
    base = _lognormal(30, 200, 0.01)
    cand = _lognormal(31, 200, 0.01) / 1.10
    r = paired_speedup(base, cand)
    assert r.call == "faster"
    assert r.lo > 1.0
    assert r.estimate == pytest.approx(1.10, abs=0.01)


def test_paired_speedup_pairs_rounds_so_shared_drift_cancels():
    n = 200
    drift = 1 + 0.3 * np.sin(np.arange(n) / 5)  # clock/thermal drift hitting both sides of a round
    base = drift * _lognormal(40, n, 0.003)
    cand = drift * _lognormal(41, n, 0.003) / 1.02
    paired = paired_speedup(base, cand)
    assert paired.call == "faster"
    shuffled = paired_speedup(np.random.default_rng(0).permutation(base), cand)  # pairing destroyed
    assert shuffled.call == "SAME"
    assert (paired.hi - paired.lo) < (shuffled.hi - shuffled.lo) / 5


def test_paired_speedup_truncates_to_shorter_and_is_deterministic():
    base, cand = _lognormal(50, 120, 0.02), _lognormal(51, 100, 0.02)
    r = paired_speedup(base, cand)
    assert r.n == 100
    assert r == paired_speedup(base, cand)
    assert r.estimate == pytest.approx(np.median(base[:100]) / np.median(cand))


def test_paired_speedup_noise_floor_and_eps_same():
    base = _lognormal(60, 2000, 0.001)
    cand = _lognormal(61, 2000, 0.001) / 1.003  # 0.3% faster, resolved by the CI
    assert paired_speedup(base, cand, noise_floor=0.0).call == "faster"
    assert paired_speedup(base, cand).call == "SAME"  # below the default 0.5% noise floor
    cand = _lognormal(61, 2000, 0.001) / 1.02
    assert paired_speedup(base, cand).call == "faster"
    assert paired_speedup(base, cand, eps_same=0.05).call == "SAME"


def test_paired_speedup_several_cases_weighted():
    b1, c1 = _lognormal(70, 100, 0.01), _lognormal(71, 100, 0.01) / 1.2
    b2, c2 = _lognormal(72, 100, 0.01), _lognormal(73, 100, 0.01)
    r = paired_speedup([b1, b2], [c1, c2], weights=[3, 1])
    s1 = np.median(b1) / np.median(c1)
    s2 = np.median(b2) / np.median(c2)
    assert r.estimate == pytest.approx((s1**3 * s2) ** 0.25)
    assert r.n == 200 and r.call == "faster"
    with pytest.raises(ValueError):
        paired_speedup([b1, b2], [c1, c2], weights=[1.0])


def test_paired_speedup_rejects_bad_input():
    with pytest.raises(ValueError):
        paired_speedup([1.0], [1.0])
    with pytest.raises(ValueError):
        paired_speedup([1.0, 0.0, 1.0], [1.0, 1.0, 1.0])


# ----------------------------------------------------------------------------- geomean


def test_weighted_geomean():
    assert weighted_geomean([2.0, 8.0], [1.0, 1.0]) == pytest.approx(4.0)
    assert weighted_geomean([2.0, 8.0], [3.0, 1.0]) == pytest.approx(2 ** 0.75 * 8 ** 0.25)
    assert weighted_geomean([2.0, 8.0], [1.0, 0.0]) == pytest.approx(2.0)
    assert weighted_geomean([1.5], [7.0]) == pytest.approx(1.5)
    for values, weights in [([1.0, 0.0], [1, 1]), ([1.0, 2.0], [0, 0]), ([1.0], [1.0, 2.0]), ([1.0], [-1.0])]:
        with pytest.raises(ValueError):
            weighted_geomean(values, weights)
