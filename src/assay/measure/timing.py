"""Timing loops, shared by the worker (for candidates) and the evaluator (for baselines), so both
sides are measured by the same code. Imports torch only: it runs inside the sandbox.

Cold sample (CUDA): flush L2 (zero a buffer of twice the L2 size), then
``start.record(); fn(*x); torch.cuda.synchronize(); end.record()`` — the device-wide
synchronize before the end event means work left on side streams is inside the sample.
Hot sample (CUDA): one CUDA graph of ``reps`` calls replayed, time / reps (no flush).
CPU sample: ``time.perf_counter`` around one call (no cache flush; marked as CPU timing).
Inputs rotate over several sets of fresh values (call i uses set i mod k).
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, Callable, Iterator, Sequence

import torch

_perf_counter = time.perf_counter  # captured at import, before any candidate


class Flusher:
    """Evicts the L2 before a cold sample by touching a buffer of twice its size.

    ``write`` (default; what nvbench and Triton's do_bench do): zero the buffer. The L2 is then
    full of *dirty* lines, written back to DRAM while the timed call runs. ``read``: reduce over
    a buffer that is never written, leaving clean lines; the previous call's dirty lines are
    written back during the flush, outside the timed window. Which one matches ncu's own cache
    control better is an open measurement (docs/measurements.md, item b)."""

    buf: Any = None
    mode = "write"

    def __init__(self, device: str, mode: str = "write") -> None:
        if mode not in ("write", "read"):
            raise ValueError(f"flush mode must be write or read, not {mode!r}")
        self.buf, self.mode = None, mode
        if device == "cuda":
            l2 = int(getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 64 << 20) or (64 << 20))
            self.buf = (torch.ones if mode == "read" else torch.empty)(2 * l2 // 4, dtype=torch.int32, device="cuda")

    def __call__(self) -> None:
        if self.buf is None:
            return
        if self.mode == "read":
            self.buf.amax()
        else:
            self.buf.zero_()


def reset_persisting_l2() -> str:
    """Set the persisting-L2 limit to 0 so an access-policy carve-out cannot survive flushes."""
    try:
        import ctypes

        rt = ctypes.CDLL("libcudart.so", mode=ctypes.RTLD_GLOBAL)
    except OSError:
        for name in ("libcudart.so.13", "libcudart.so.12"):
            try:
                import ctypes

                rt = ctypes.CDLL(name)
                break
            except OSError:
                rt = None
        if rt is None:
            return "libcudart not found: persisting-L2 limit not reset"
    cudaLimitPersistingL2CacheSize = 0x06
    err = rt.cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, ctypes.c_size_t(0))
    return "persisting-L2 limit set to 0" if err == 0 else f"cudaDeviceSetLimit returned {err}"


def sleep_rate() -> float:
    """Clock cycles per second of ``torch.cuda._sleep`` (measured once per process)."""
    global _SLEEP_RATE
    if _SLEEP_RATE is None:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(100_000)  # warm
        rates = []
        for _ in range(3):
            start.record()
            torch.cuda._sleep(2_000_000)
            end.record()
            end.synchronize()
            rates.append(2_000_000 / max(start.elapsed_time(end) / 1e3, 1e-9))
        rates.sort()
        _SLEEP_RATE = rates[1]
    return _SLEEP_RATE


_SLEEP_RATE: float | None = None


def block(seconds: float) -> None:
    """Keep the current stream busy for ``seconds`` (a spinning kernel), so the host can enqueue
    the timed call while the GPU waits: no host launch latency inside the timed window (nvbench's
    blocking kernel; a spin of calibrated length instead of a host-released flag)."""
    if seconds > 0:
        torch.cuda._sleep(max(1, int(seconds * sleep_rate())))


def block_for(fn: Callable[..., Any], sets: Sequence[Sequence[Any]], device: str, n: int = 5) -> float:
    """How long the blocking spin before each sample must last: twice the host time the call takes
    to enqueue its work (measured with the GPU kept busy), at least 20 us, at most 2 ms."""
    if device != "cuda":
        return 0.0
    host = []
    for i in range(n):
        torch.cuda.synchronize()
        block(3e-3)  # the GPU is busy: the call's host time is its enqueue time, not a wait
        w0 = _perf_counter()
        fn(*sets[i % len(sets)])
        host.append(_perf_counter() - w0)
    torch.cuda.synchronize()
    host.sort()
    return min(max(2 * host[len(host) // 2] + 10e-6, 20e-6), 2e-3)


def cold_samples(fn: Callable[..., Any], sets: Sequence[Sequence[Any]], n: int, device: str,
                 flusher: Flusher | None = None, start_index: int = 0,
                 block_s: float = 0.0) -> tuple[list[float], list[float], Any]:
    """``n`` cold samples in seconds, the escape time of each (CUDA), and the last output.

    CUDA: flush L2, a blocking spin of ``block_s`` (see ``block``), ``start``, the call,
    ``tight`` on the current stream; then a device-wide synchronize and ``end``. The sample is
    ``tight - start``; ``escape`` = ``end - tight`` is the host round trip plus any work the call
    left running on other streams. The caller compares escapes with those of an empty call:
    work escaping the timed stream shows up there (and is then charged to the candidate).
    """
    out: Any = None
    times, escapes = [], []
    if device == "cuda":
        flusher = flusher or Flusher(device)
        start, tight, end = (torch.cuda.Event(enable_timing=True) for _ in range(3))
        for i in range(n):
            x = sets[(start_index + i) % len(sets)]
            flusher()  # no synchronize after it: the GPU stays busy while the call is enqueued
            block(block_s)
            start.record()
            out = fn(*x)
            tight.record()
            torch.cuda.synchronize()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(tight) / 1e3)
            escapes.append(tight.elapsed_time(end) / 1e3)
    else:
        for i in range(n):
            x = sets[(start_index + i) % len(sets)]
            w0 = _perf_counter()
            out = fn(*x)
            times.append(_perf_counter() - w0)
            escapes.append(0.0)
    return times, escapes, out


@contextlib.contextmanager
def cpu_threads(n: int) -> Iterator[None]:
    """torch's intra-op threads set to ``n`` for the block (0: left as they are). CPU timings run
    single-threaded on every side by default: on a loaded machine an OpenMP barrier waits for a
    descheduled thread for a whole time slice (seen: a 25 us softmax timed at 0.8-7.8 ms in one
    process and 42 us in the other, on 2 cores with another job running)."""
    if n <= 0:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def null_escapes(device: str, n: int = 30) -> tuple[float, float]:
    """Median and p90 escape time of an empty call (the host round trip of the synchronize)."""
    if device != "cuda":
        return 0.0, 0.0
    # a short pending kernel, so the synchronize really waits (its wake-up latency is the baseline)
    _, esc, _ = cold_samples(lambda: torch.cuda._sleep(2000), [[]], n, device, Flusher.__new__(Flusher))
    esc.sort()
    return esc[len(esc) // 2], esc[min(len(esc) - 1, int(0.9 * len(esc)))]


def sample_index(numel: int, k: int, seed: int) -> Any:
    """Positions of the output elements re-checked after a timing round (all when few)."""
    if numel <= k:
        return None
    return torch.randint(0, numel, (k,), generator=torch.Generator().manual_seed(seed))


def sample(o: Any, k: int, seed: int) -> Any:
    """The elements of ``o`` at ``sample_index`` positions (all of ``o`` when it is small): the
    worker sends the candidate's, the evaluator keeps the reference's, picked the same way."""
    idx = sample_index(o.numel(), k, seed)
    return o if idx is None else o.reshape(-1)[idx.to(o.device)]


def hot_time(fn: Callable[..., Any], x: Sequence[Any], reps: int = 20, replays: int = 10) -> tuple[float | None, str]:
    """Median per-call time of a CUDA graph of ``reps`` calls; (None, reason) if capture fails."""
    try:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                fn(*x)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(reps):
                fn(*x)
        g.replay()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        per = []
        for _ in range(replays):
            start.record()
            g.replay()
            end.record()
            end.synchronize()
            per.append(start.elapsed_time(end) / 1e3 / reps)
        per.sort()
        return per[len(per) // 2], "cuda graph replay"
    except Exception as e:  # noqa: BLE001 - a candidate that cannot be captured has no hot number
        torch.cuda.synchronize()
        return None, f"graph capture failed: {type(e).__name__}: {str(e)[:120]}"


def profiled_kernel_time(fn: Callable[..., Any], x: Sequence[Any], calls: int = 5) -> tuple[float | None, list[str]]:
    """Mean per-call sum of GPU kernel durations (torch.profiler), and the kernel names seen."""
    try:
        from torch.profiler import ProfilerActivity, profile

        fn(*x)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(calls):
                fn(*x)
            torch.cuda.synchronize()
        total_us, names = 0.0, set()
        for ev in prof.events():
            dev_type = getattr(ev, "device_type", None)
            if dev_type is not None and "CUDA" in str(dev_type):
                total_us += ev.device_time if hasattr(ev, "device_time") else ev.cuda_time
                names.add(ev.name)
        return total_us / calls / 1e6, sorted(names)[:20]
    except Exception as e:  # noqa: BLE001
        return None, [f"profiler failed: {type(e).__name__}"]


def clocks() -> dict[str, Any]:
    """SM clock, max SM clock and power limit from nvidia-smi (empty when unavailable)."""
    import subprocess

    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,clocks.max.sm,power.limit,temperature.gpu",
                            "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=10)
        sm, sm_max, power, temp = (v.strip() for v in r.stdout.splitlines()[0].split(","))
        return {"sm_mhz": float(sm), "sm_max_mhz": float(sm_max), "power_limit_w": float(power), "temp_c": float(temp)}
    except Exception:  # noqa: BLE001
        return {}
