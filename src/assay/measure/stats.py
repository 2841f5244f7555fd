"""Statistics for kernel timing samples. Pure numpy, no torch.

Every sample is one timed run in seconds. The rules:

* Outliers (``drop_outliers``), the tritonbench rule: with Q1 and Q3 the 25th and
  75th percentiles (numpy's linear interpolation) and IQR = Q3 - Q1, a sample is an
  outlier when it lies outside [Q1 - 1.5 IQR, Q3 + 1.5 IQR]. At least
  ``min(n, 5)`` samples are always kept: if the fences would leave fewer, only
  the most distant outliers (distance from the median) are dropped, down to 5.
* Summary (``summarize``): ``n`` is the number of samples given and ``n_outliers``
  how many the outlier rule dropped. median, mean, iqr, p10, p90 and
  ``rel_stderr`` (the standard error of the mean, std(ddof=1)/sqrt(k), divided by
  the mean) are computed on the k kept samples; ``min`` and ``max`` are of all
  samples, so a dropped outlier stays visible. ``rel_stderr`` is ``inf`` with
  fewer than 2 kept samples or a zero mean.
* Adaptive stopping (``AdaptiveStop``), the nvbench criteria: keep sampling until
  n >= ``min_samples`` and the sum of the samples >= ``min_time`` and the
  outlier-free ``rel_stderr`` <= ``target_rel_stderr`` (reason ``'converged'``),
  or until ``max_time`` has passed (reason ``'time cap'``), whichever is first.
  The time cap counts the larger of the wall time since the stopper was built
  and the sum of the samples.
* Speedup (``paired_speedup``): speedup = median(baseline) / median(candidate),
  so > 1 means the candidate is faster. Baseline and candidate are timed in
  interleaved rounds (A B A B ...), so round i of one is paired with round i of
  the other (the longer list is truncated) and the 95% confidence interval is a
  percentile bootstrap that resamples *pairs*: drift that hits both sides of a
  round cancels instead of widening the interval. No outliers are dropped (the
  medians are robust already and dropping would break the pairing). The call is
  ``'faster'`` when the CI's low end is above 1 + ``eps_same``, ``'slower'`` when
  its high end is below 1 - ``eps_same``, and ``'SAME'`` otherwise, or whenever
  |estimate - 1| < ``noise_floor`` (an effect too small to matter even if real).
  Several cases (shapes) may be passed at once, one list of samples per case:
  the estimate is then the weighted geometric mean of the per-case speedups and
  each bootstrap replicate resamples the pairs of every case independently.
* ``weighted_geomean``: exp(sum(w * log v) / sum(w)); values must be > 0,
  weights >= 0 with a positive sum.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias, cast

import numpy as np
import numpy.typing as npt

FloatArray: TypeAlias = npt.NDArray[np.float64]
Samples: TypeAlias = Sequence[float] | npt.ArrayLike
Call: TypeAlias = Literal["faster", "slower", "SAME"]
StopReason: TypeAlias = Literal["converged", "time cap"]

IQR_FENCE = 1.5
MIN_KEEP = 5
_BOOT_CHUNK_ELEMS = 4_000_000  # cap on the (replicates x pairs) index block held at once


def _as_samples(samples: Samples, name: str = "samples") -> FloatArray:
    a = np.asarray(samples, dtype=np.float64)
    if a.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {a.shape}")
    if a.size == 0:
        raise ValueError(f"{name} is empty")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} contains non-finite values")
    if np.any(a < 0):
        raise ValueError(f"{name} contains negative times")
    return a


# ----------------------------------------------------------------------------- outliers


def drop_outliers(samples: Samples) -> tuple[FloatArray, int]:
    """Drop samples outside [Q1 - 1.5 IQR, Q3 + 1.5 IQR], keeping at least min(n, 5).

    Returns the kept samples (in their original order) and how many were dropped.
    """
    a = _as_samples(samples)
    q1, q3 = np.percentile(a, [25.0, 75.0])
    iqr = q3 - q1
    inside = (a >= q1 - IQR_FENCE * iqr) & (a <= q3 + IQR_FENCE * iqr)
    min_keep = min(a.size, MIN_KEEP)
    if int(inside.sum()) < min_keep:
        inside = _closest_to_median(a, min_keep)
    kept = a[inside]
    return kept, int(a.size - kept.size)


def _closest_to_median(a: FloatArray, k: int) -> npt.NDArray[np.bool_]:
    order = np.argsort(np.abs(a - np.median(a)), kind="stable")
    mask = np.zeros(a.size, dtype=bool)
    mask[order[:k]] = True
    return mask


# ----------------------------------------------------------------------------- summary


@dataclass(frozen=True)
class Summary:
    n: int
    median: float
    mean: float
    iqr: float
    p10: float
    p90: float
    min: float
    max: float
    rel_stderr: float
    n_outliers: int
    unit: str = "s"


def relative_stderr(samples: Samples) -> float:
    """Standard error of the mean over the mean (no outlier removal); inf if undefined."""
    a = _as_samples(samples)
    mean = float(a.mean())
    if a.size < 2 or mean == 0.0:
        return math.inf
    return float(a.std(ddof=1) / math.sqrt(a.size) / mean)


def summarize(samples: Samples) -> Summary:
    """Summarize timing samples (seconds); see the module docstring for the rules."""
    a = _as_samples(samples)
    kept, n_dropped = drop_outliers(a)
    q1, q3, p10, p50, p90 = np.percentile(kept, [25.0, 75.0, 10.0, 50.0, 90.0])
    return Summary(
        n=int(a.size),
        median=float(p50),
        mean=float(kept.mean()),
        iqr=float(q3 - q1),
        p10=float(p10),
        p90=float(p90),
        min=float(a.min()),
        max=float(a.max()),
        rel_stderr=relative_stderr(kept),
        n_outliers=n_dropped,
    )


# ----------------------------------------------------------------------------- adaptive stop


class AdaptiveStop:
    """nvbench-style stopping rule. Build it right before the timing loop:

        stop = AdaptiveStop()
        while not stop.done:
            stop.add(time_one_run())

    ``done`` latches: once true it stays true. The outlier-free rel_stderr is
    re-evaluated on a geometric schedule (every sample up to 64, then every
    ~n/64 samples) so that a long run stays O(n) amortized per check.
    """

    def __init__(
        self,
        min_samples: int = 10,
        min_time: float = 0.5,
        max_time: float = 15.0,
        target_rel_stderr: float = 0.005,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        if min_samples < 2:
            raise ValueError("min_samples must be >= 2")
        if min_time < 0 or max_time <= 0 or target_rel_stderr <= 0:
            raise ValueError("min_time must be >= 0, max_time and target_rel_stderr > 0")
        self.min_samples = min_samples
        self.min_time = min_time
        self.max_time = max_time
        self.target_rel_stderr = target_rel_stderr
        self._clock = clock
        self._t0 = clock()
        self._samples: list[float] = []
        self._total = 0.0
        self._next_check = 0
        self._reason: StopReason | None = None

    def add(self, sample_s: float) -> None:
        """Record one timed run (seconds) and update ``done``/``reason``."""
        x = float(sample_s)
        if not math.isfinite(x) or x < 0:
            raise ValueError(f"sample must be a finite non-negative time, got {sample_s!r}")
        self._samples.append(x)
        self._total += x
        if self._reason is None:
            self._reason = self._evaluate()

    def _evaluate(self) -> StopReason | None:
        n = len(self._samples)
        if n >= self.min_samples and self._total >= self.min_time and n >= self._next_check:
            self._next_check = n + max(1, n // 64)
            if self.rel_stderr <= self.target_rel_stderr:
                return "converged"
        if max(self.wall_time, self._total) >= self.max_time:
            return "time cap"
        return None

    @property
    def done(self) -> bool:
        return self._reason is not None

    @property
    def reason(self) -> StopReason | None:
        """'converged', 'time cap', or None while not done."""
        return self._reason

    @property
    def n(self) -> int:
        return len(self._samples)

    @property
    def total(self) -> float:
        """Sum of the samples, seconds."""
        return self._total

    @property
    def wall_time(self) -> float:
        """Seconds since the stopper was built, by its clock."""
        return self._clock() - self._t0

    @property
    def samples(self) -> FloatArray:
        return np.asarray(self._samples, dtype=np.float64)

    @property
    def rel_stderr(self) -> float:
        """rel_stderr of the outlier-free samples (inf with fewer than 2)."""
        if len(self._samples) < 2:
            return math.inf
        kept, _ = drop_outliers(self._samples)
        return relative_stderr(kept)

    def summary(self) -> Summary:
        return summarize(self._samples)


# ----------------------------------------------------------------------------- speedup


@dataclass(frozen=True)
class SpeedupCI:
    estimate: float
    lo: float
    hi: float
    n: int
    call: Call


def weighted_geomean(values: Samples, weights: Samples) -> float:
    """exp(sum(w * log v) / sum(w)); values > 0, weights >= 0 with a positive sum."""
    v = np.asarray(values, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    if v.ndim != 1 or v.shape != w.shape or v.size == 0:
        raise ValueError(f"values and weights must be non-empty 1-D of equal length, got {v.shape}, {w.shape}")
    if not (np.all(np.isfinite(v)) and np.all(v > 0)):
        raise ValueError("values must be finite and > 0")
    if not (np.all(np.isfinite(w)) and np.all(w >= 0)) or w.sum() <= 0:
        raise ValueError("weights must be finite, >= 0, with a positive sum")
    return float(np.exp(np.sum(w * np.log(v)) / w.sum()))


def classify(estimate: float, lo: float, hi: float, eps_same: float = 0.0, noise_floor: float = 0.005) -> Call:
    """'faster' / 'slower' if the CI excludes [1 - eps, 1 + eps] and the effect >= noise_floor."""
    if abs(estimate - 1.0) < noise_floor:
        return "SAME"
    if lo > 1.0 + eps_same:
        return "faster"
    if hi < 1.0 - eps_same:
        return "slower"
    return "SAME"


def paired_speedup(
    base_samples: Samples | Sequence[Samples],
    cand_samples: Samples | Sequence[Samples],
    weights: Samples | None = None,
    n_boot: int = 2000,
    seed: int = 0,
    *,
    eps_same: float = 0.0,
    noise_floor: float = 0.005,
    confidence: float = 0.95,
) -> SpeedupCI:
    """Speedup median(base)/median(cand) with a paired-bootstrap confidence interval.

    ``base_samples``/``cand_samples`` are either one list of per-round times (one
    case) or a list of such lists (several cases, matched by position, combined
    by ``weighted_geomean`` with ``weights``, default equal). Rounds are paired by
    index and truncated to the shorter side; ``n`` in the result is the total
    number of pairs used.
    """
    if n_boot < 100:
        raise ValueError("n_boot must be >= 100")
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must be in (0, 1)")
    cases = _paired_cases(base_samples, cand_samples)
    w = np.ones(len(cases)) if weights is None else np.asarray(weights, dtype=np.float64)
    if w.shape != (len(cases),):
        raise ValueError(f"weights must have one entry per case ({len(cases)}), got shape {w.shape}")

    point = np.array([np.median(b) / np.median(c) for b, c in cases])
    estimate = weighted_geomean(point, w)
    rng = np.random.default_rng(seed)
    log_boot = np.zeros(n_boot)
    for (b, c), wi in zip(cases, w / w.sum()):
        log_boot += wi * np.log(_boot_ratio(b, c, n_boot, rng))
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.exp(np.quantile(log_boot, [alpha, 1.0 - alpha]))
    n = sum(b.size for b, _ in cases)
    return SpeedupCI(estimate, float(lo), float(hi), n, classify(estimate, float(lo), float(hi), eps_same, noise_floor))


def _paired_cases(
    base: Samples | Sequence[Samples], cand: Samples | Sequence[Samples]
) -> list[tuple[FloatArray, FloatArray]]:
    base_cases, cand_cases = _split_cases(base), _split_cases(cand)
    if len(base_cases) != len(cand_cases):
        raise ValueError(f"{len(base_cases)} baseline cases but {len(cand_cases)} candidate cases")
    out = []
    for i, (b, c) in enumerate(zip(base_cases, cand_cases)):
        b, c = _as_samples(b, f"baseline case {i}"), _as_samples(c, f"candidate case {i}")
        k = min(b.size, c.size)
        if k < 2:
            raise ValueError(f"case {i} has fewer than 2 paired rounds")
        if np.any(b[:k] <= 0) or np.any(c[:k] <= 0):
            raise ValueError(f"case {i} has a zero time; a ratio of medians needs positive times")
        out.append((b[:k], c[:k]))
    return out


def _split_cases(x: Samples | Sequence[Samples]) -> list[npt.ArrayLike]:
    """One case (a flat list / 1-D array) or several (a list of lists / 2-D array)."""
    if isinstance(x, np.ndarray):
        return [x] if x.ndim == 1 else list(x)
    seq: list[Any] = list(cast(Iterable[Any], x))
    if seq and all(isinstance(s, (Sequence, np.ndarray)) and not isinstance(s, str) for s in seq):
        return seq
    return [seq]


def _boot_ratio(b: FloatArray, c: FloatArray, n_boot: int, rng: np.random.Generator) -> FloatArray:
    """median(b[idx]) / median(c[idx]) for n_boot resamples idx of the pair indices."""
    n = b.size
    out = np.empty(n_boot)
    chunk = max(1, _BOOT_CHUNK_ELEMS // n)
    for start in range(0, n_boot, chunk):
        stop = min(n_boot, start + chunk)
        idx = rng.integers(0, n, size=(stop - start, n))
        out[start:stop] = np.median(b[idx], axis=1) / np.median(c[idx], axis=1)
    return out
