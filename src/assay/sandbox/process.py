"""Start, talk to, and kill one untrusted worker process.

Containment, strongest available first (what was used is reported in ``Worker.containment``):

- environment allow-list (names with KEY/TOKEN/SECRET/PASSWORD/CREDENTIAL always dropped);
- ``unshare --user --map-root-user --net --pid --fork --kill-child``: no network (only a
  down loopback), and every process the candidate starts dies with the worker's pid
  namespace; without unshare, a Python-level socket guard (weaker: ctypes can bypass it);
- its own temporary directory as cwd, HOME and TMPDIR; the candidate file is copied there;
- rlimits (CORE=0, NOFILE, FSIZE, CPU, NPROC; never RLIMIT_AS: CUDA reserves address space);
  DATA on CPU-only workers caps an enormous host allocation;
- a cgroup (v2, or v1 pids/memory) with pids.max and memory.max when the evaluator may make one;
- a wall-clock timeout per request, after which the whole process group is SIGKILLed;
- ``PR_SET_PDEATHSIG``: the worker (or ``unshare``, whose ``--kill-child`` passes it on) is
  SIGKILLed when the evaluator dies, even by SIGKILL, so no candidate outlives its evaluator.
  Linux ties this to the *thread* that started the worker: ``check`` starts and closes its
  workers in the calling thread, so a caller's thread may end only after ``check`` returns.
"""

from __future__ import annotations

import fcntl
import glob
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, NoReturn

from assay.sandbox import protocol

ENV_ALLOW = (
    "PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM",
    "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "CUDA_PATH", "LD_LIBRARY_PATH", "CC", "CXX",
    "TORCH_CUDA_ARCH_LIST", "TRITON_PTXAS_PATH", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES",
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST",
    "NVSHMEM_DISABLE_NVLS",
)
ENV_DENY_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL")
_BOOT = "import sys; sys.path.insert(0, sys.argv[1]); from assay.sandbox.worker import main; main()"


class WorkerDied(Exception):
    """The worker crashed, hung, or broke the protocol; ``kind`` says which."""

    def __init__(self, kind: str, message: str, output: str = "") -> None:
        super().__init__(message)
        self.kind = kind  # timeout | crash | protocol
        self.message = message
        self.output = output


@dataclass
class Limits:
    nofile: int = 1024
    fsize_bytes: int = 2 << 30
    nproc_extra: int = 512  # beyond the user's current process count (threads count too)
    pids_max: int = 512  # cgroup pids.max
    # host memory cap (cgroup v2 memory.max; RLIMIT_DATA on CPU-only workers): half the RAM
    memory_bytes: int | None = field(default_factory=lambda: _half_ram())
    cpu_seconds: int = 3600


def _half_ram() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2
    except (ValueError, OSError):
        return None


def clean_env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in ENV_ALLOW}
    env.update(extra)
    return {k: v for k, v in env.items() if not any(w in k.upper() for w in ENV_DENY_WORDS)}


# Device files a worker may open for writing. Not /dev as a whole: /dev/shm is a host-wide tmpfs
# (files written there outlive the worker and reach the next candidate), and block devices live in
# /dev (writable by a worker that runs as root without a user namespace, as CUDA workers do).
DEV_WRITABLE = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty")


def writable_devices() -> list[str]:
    """DEV_WRITABLE plus the NVIDIA driver's nodes (the CUDA driver opens them read-write)."""
    return [*DEV_WRITABLE, *sorted(glob.glob("/dev/nvidia*")), *sorted(glob.glob("/dev/dri/render*"))]


_CUDA_PROBE = "import ctypes,sys; sys.exit(ctypes.CDLL('libcuda.so.1').cuInit(0))"


@lru_cache(maxsize=4)
def unshare_prefix(device: str = "cpu") -> tuple[str, ...]:
    """The strongest namespace wrapper this host allows (and, for cuda, where CUDA still
    initialises: the driver fails with error 304 inside a user namespace), or ()."""
    exe = shutil.which("unshare")
    if not exe:
        return ()
    plain = ("--net", "--pid", "--fork", "--kill-child")
    userns = ("--user", "--map-root-user", *plain)
    # least privilege first: a user namespace; but CUDA fails inside one (error 304), so for
    # cuda as root, plain namespaces come first
    if os.geteuid() != 0:
        bases: tuple[tuple[str, ...], ...] = (userns,)
    else:
        bases = (plain, userns) if device == "cuda" else (userns, plain)
    # --mount-proc: a /proc of the worker's own pid namespace. Without it the host's /proc stays
    # visible, and a worker running as root reads the evaluator's /proc/<pid>/environ (its secrets).
    options = tuple((*b, "--mount-proc") for b in bases) + bases
    probe = (sys.executable, "-c", _CUDA_PROBE) if device == "cuda" else ("true",)
    for args in options:
        cmd = (exe, *args, "--")
        try:
            r = subprocess.run((*cmd, *probe), capture_output=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if r.returncode == 0:
            return cmd
    return ()


def _make_cgroup(limits: Limits) -> Path | None:
    """A fresh cgroup with pids.max/memory.max, or None when we may not make one."""
    name = f"assay-{uuid.uuid4().hex[:10]}"
    v2 = Path("/sys/fs/cgroup")
    cg = v2 / name if (v2 / "cgroup.controllers").exists() else v2 / "pids" / name
    try:
        cg.mkdir()
    except OSError:
        return None
    try:
        (cg / "pids.max").write_text(str(limits.pids_max))
        if limits.memory_bytes and cg.parent == v2:
            (cg / "memory.max").write_text(str(limits.memory_bytes))
        return cg
    except OSError:  # made, but the controller is not ours to use: don't leave it behind
        try:
            cg.rmdir()
        except OSError:
            pass
        return None


PR_SET_PDEATHSIG = 1


def die_with_parent() -> Callable[[], None]:
    """A ``preexec_fn`` (or a step of one): the child gets SIGKILL when this process dies, even by
    SIGKILL (Linux; a no-op elsewhere), and ends at once if this process is already gone. libc's
    prctl is looked up here, in the parent: nothing is imported or loaded between fork and exec."""
    parent = os.getpid()
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return lambda: None

    def arm() -> None:
        prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return arm


def _preexec(limits: Limits, cgroup: Path | None, cpu_only: bool, arm: Callable[[], None]) -> None:
    os.setsid()
    arm()  # die_with_parent()
    if cgroup is not None:
        try:
            (cgroup / "cgroup.procs").write_text(str(os.getpid()))
        except OSError:
            pass
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits.nofile, limits.nofile))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.fsize_bytes, limits.fsize_bytes))
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds))
    try:
        nproc = len(os.listdir("/proc")) + limits.nproc_extra
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
    except (OSError, ValueError):
        pass
    if cpu_only and limits.memory_bytes:
        resource.setrlimit(resource.RLIMIT_DATA, (limits.memory_bytes, limits.memory_bytes))


@dataclass
class Worker:
    device: str = "cpu"
    limits: Limits = field(default_factory=Limits)
    cache_dir: Path | None = None
    extra_env: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None
    tmp: Path | None = None
    containment: dict[str, Any] = field(default_factory=dict)
    wrap: tuple[str, ...] = ()  # a launcher put in front of python inside the sandbox (the profile stage's ncu)

    def start(self) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="assay-worker-"))
        req_r, req_w = os.pipe()
        resp_r, resp_w = os.pipe()
        env = {"HOME": str(self.tmp), "TMPDIR": str(self.tmp), "PYTHONHASHSEED": "0",
               "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1"}
        if self.cache_dir is not None:
            env["TRITON_CACHE_DIR"] = str(self.cache_dir / "triton")
        writable = [str(self.tmp), *writable_devices(), "/proc/self"]  # CUDA writes under /proc/self (error 304 without)
        if self.device == "cuda":
            writable.append("/dev/shm")  # CUDA IPC (this /dev list ran the GPU tests on the H200, 2026-11-30)
        if self.cache_dir is not None:
            writable.append(str(self.cache_dir / "triton"))
        if "TORCH_EXTENSIONS_DIR" in self.extra_env:
            writable.append(self.extra_env["TORCH_EXTENSIONS_DIR"])
        env["ASSAY_WRITABLE"] = os.pathsep.join(writable)
        if self.device == "cpu":
            env["TRITON_INTERPRET"] = "1"
            env["CUDA_VISIBLE_DEVICES"] = ""
        env.update(self.extra_env)
        prefix = unshare_prefix(self.device)
        if not prefix:
            env["ASSAY_NET_GUARD"] = "python"
        cgroup = _make_cgroup(self.limits)
        src = str(Path(__file__).resolve().parents[2])
        launcher = self.tmp / "launch.py"
        # the worker sees the protocol pipes as fds 3 (requests) and 4 (responses)
        launcher.write_text(
            "import os, sys, fcntl\n"
            f"a = fcntl.fcntl({req_r}, fcntl.F_DUPFD, 10); b = fcntl.fcntl({resp_w}, fcntl.F_DUPFD, 10)\n"
            f"os.close({req_r}); os.close({resp_w}); os.dup2(a, 3); os.dup2(b, 4); os.close(a); os.close(b)\n"
            f"{_BOOT}\n"
        )
        cmd = [*prefix, *self.wrap, sys.executable, "-I", "-B", str(launcher), src]
        self._out = open(self.tmp / "output.log", "wb")
        arm = die_with_parent()
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=self._out, stderr=subprocess.STDOUT,
            cwd=self.tmp, env=clean_env(env), pass_fds=(req_r, resp_w),
            preexec_fn=lambda: _preexec(self.limits, cgroup, self.device == "cpu", arm),
        )
        os.close(req_r)
        os.close(resp_w)
        self._req, self._resp = req_w, resp_r
        fcntl.fcntl(self._req, fcntl.F_SETFL, fcntl.fcntl(self._req, fcntl.F_GETFL) | os.O_NONBLOCK)
        self._cgroup = cgroup
        self.containment = {
            "process": "separate worker process, own session and process group",
            "network": "network namespace (no interfaces up)" if prefix else "python socket guard (weak)",
            "pid_namespace": bool(prefix),
            "cgroup": str(cgroup.name) if cgroup else None,
            "env": "allow-list",
            "workdir": "private temporary directory",
        }

    def stage_file(self, path: Path) -> Path:
        """Copy the candidate into the worker's own directory; the worker imports the copy."""
        assert self.tmp is not None
        dst = self.tmp / "candidate.py"
        shutil.copyfile(path, dst)
        return dst

    def stage_source(self, source: str) -> Path:
        """Write the candidate's source (the text that was scanned and hashed) into the worker's
        own directory; the worker imports that file."""
        assert self.tmp is not None
        dst = self.tmp / "candidate.py"
        dst.write_text(source)
        return dst

    def request(self, msg: dict[str, Any], timeout: float, max_bytes: int = 1 << 33) -> dict[str, Any]:
        return self.receive(self.send(msg, timeout), max_bytes)

    def send(self, msg: dict[str, Any], timeout: float) -> float:
        """Send one request; returns the deadline for its answer (``receive``). One request at a
        time: the next is sent only after this one's answer was received."""
        if self.proc is None:
            self.start()
        deadline = time.monotonic() + timeout
        self._timeout = timeout
        try:
            self._send(msg, deadline)
        except Exception as e:
            self._died(e)
        return deadline

    def receive(self, deadline: float, max_bytes: int = 1 << 33) -> dict[str, Any]:
        try:
            resp = protocol.recv(self._resp, max(0.0, deadline - time.monotonic()), max_bytes=max_bytes)
        except Exception as e:
            self._died(e)
        if not isinstance(resp, dict):
            self.kill()
            raise WorkerDied("protocol", "worker sent a non-object response", self.output())
        return resp

    def _died(self, e: Exception) -> NoReturn:
        if isinstance(e, protocol.PeerTimeout):
            self.kill()
            raise WorkerDied("timeout", f"no answer within {self._timeout:.0f} s; worker killed",
                             self.output()) from None
        if isinstance(e, (protocol.PeerClosed, BrokenPipeError, OSError)):
            code = self._reap()
            raise WorkerDied("crash", _describe_exit(code), self.output()) from None
        if isinstance(e, protocol.ProtocolError):
            self.kill()
            raise WorkerDied("protocol", f"worker broke the protocol: {e}", self.output()) from None
        raise e

    def _send(self, msg: dict[str, Any], deadline: float) -> None:
        import select

        header, buffers = protocol.encode(msg)
        chunks = [protocol._LEN.pack(len(header)) + header, *buffers]
        for chunk in chunks:
            view = memoryview(chunk).cast("B")
            while view:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise protocol.PeerTimeout("worker does not read")
                _, w, _ = select.select([], [self._req], [], left)
                if not w:
                    continue
                try:
                    n = os.write(self._req, view[: 1 << 20])
                except BlockingIOError:
                    continue
                view = view[n:]

    def output(self, limit: int = 4000) -> str:
        if self.tmp is None or not (self.tmp / "output.log").exists():
            return ""
        with open(self.tmp / "output.log", "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - limit))
            return f.read().decode(errors="replace")

    def _reap(self) -> int | None:
        assert self.proc is not None
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        self.kill()
        return code

    def kill(self) -> None:
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        for fd in (self._req, self._resp):
            try:
                os.close(fd)
            except OSError:
                pass
        self.proc = None
        if self._cgroup is not None:
            for _ in range(20):
                _kill_cgroup(self._cgroup)  # a child that left the process group (setsid) is still in here
                try:
                    self._cgroup.rmdir()
                    break
                except OSError:
                    time.sleep(0.05)

    def close(self) -> None:
        # No graceful "exit" request: every answer has been received, the worker holds nothing
        # that needs a clean shutdown, and the interpreter's teardown with torch and triton
        # loaded costs ~0.7 s. The process group (and the cgroup) is killed instead.
        self.kill()
        self._out.close() if hasattr(self, "_out") else None
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None

    def __enter__(self) -> "Worker":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _kill_cgroup(cgroup: Path) -> None:
    """SIGKILL every process left in the worker's cgroup (cgroup.kill on v2, pid by pid on v1)."""
    try:
        if (cgroup / "cgroup.kill").exists():
            (cgroup / "cgroup.kill").write_text("1")
            return
        pids = [int(x) for x in (cgroup / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "worker stopped answering and was killed"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = str(-code)
        return f"worker died from signal {name}"
    return f"worker exited with status {code} in the middle of a request"
