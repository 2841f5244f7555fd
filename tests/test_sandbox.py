"""The sandbox: worker containment (env, network, cwd, kill) and the wire protocol."""

from __future__ import annotations

import json
import math
import os
import socket
import struct
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest
import torch

from assay.sandbox import process
from assay.sandbox import protocol as P
from assay.sandbox.process import Worker, WorkerDied

SECRETS = {
    "OPENAI_API_KEY": "sk-openai-secret-1234",
    "ANTHROPIC_API_KEY": "sk-ant-secret-5678",
    "ANY_TOKEN": "tok-secret-9abc",
}


def _decode_text(t: torch.Tensor) -> str:
    return bytes(t.to(torch.uint8).tolist()).decode()


def _worker_with(tmp_path: Path, source: str, **kw) -> Worker:
    """A started worker that has loaded ``source`` (its ``entry`` function)."""
    cand = tmp_path / "cand.py"
    cand.write_text(textwrap.dedent(source))
    w = Worker(**kw)
    w.start()
    staged = w.stage_file(cand)
    resp = w.request({"op": "load", "path": str(staged), "entry": "entry", "device": "cpu"}, timeout=60)
    assert resp["ok"], resp
    return w


def _run(w: Worker, *inputs, timeout: float = 30) -> dict:
    resp = w.request({"op": "run", "inputs": list(inputs)}, timeout=timeout)
    assert resp["ok"], resp
    return resp


@pytest.fixture
def no_namespaces(monkeypatch):
    """Force the fallback containment (no unshare): Python socket guard, process group + cgroup kill."""
    monkeypatch.setattr(process, "unshare_prefix", lambda *a, **k: ())


# -- environment ---------------------------------------------------------------------------

ENV_PROBE = """
import os
import torch

NAMES = {names!r}
VALUES = {values!r}

def entry(x):
    env = dict(os.environ)
    try:
        proc_env = open("/proc/self/environ", "rb").read().decode(errors="replace")
    except OSError:
        proc_env = ""
    visible = [int(n in env) for n in NAMES]
    leaked = [int(any(v in val for val in env.values()) or v in proc_env) for v in VALUES]
    deny = [int(any(w in k.upper() for w in ("KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL"))) for k in env]
    # any process whose environment the worker can read (the evaluator's, via the host's /proc)
    readable = 0
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                data = open(f"/proc/{{d}}/environ", "rb").read().decode(errors="replace")
            except OSError:
                continue
            readable += int(any(v in data for v in VALUES))
    return torch.tensor(visible + leaked + [sum(deny), readable])
"""


def test_worker_env_has_no_secrets(tmp_path, monkeypatch):
    for k, v in SECRETS.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("ASSAY_TEST_NOT_ALLOWED", "plain-value-xyz")
    names = [*SECRETS, "ASSAY_TEST_NOT_ALLOWED", "MY_SECRET_EXTRA"]
    values = [*SECRETS.values(), "plain-value-xyz", "extra-secret-value"]
    src = ENV_PROBE.format(names=names, values=values)
    # /proc/<pid>/environ shows the environment a process was *started* with (monkeypatch's putenv
    # does not show there): a host process started with the secrets stands in for the evaluator.
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                              env={**os.environ, **SECRETS})
    # a secret smuggled in through extra_env is dropped by the deny words too
    w = _worker_with(tmp_path, src, extra_env={"MY_SECRET_EXTRA": "extra-secret-value"})
    try:
        out = _run(w, torch.zeros(1))["outputs"][0].tolist()
    finally:
        w.close()
        holder.kill()
        holder.wait()
    n = len(names)
    assert out[:n] == [0] * n, dict(zip(names, out[:n]))
    assert out[n:2 * n] == [0] * n, dict(zip(values, out[n:2 * n]))
    assert out[2 * n] == 0  # no variable with a deny word at all
    assert w.containment["env"] == "allow-list"
    if w.containment["pid_namespace"]:
        # the worker has its own /proc: it cannot read the evaluator's environment there either
        assert out[2 * n + 1] == 0, "a host process's /proc/<pid>/environ is readable from the worker"


def test_clean_env_filters():
    env = process.clean_env({"GOOD": "1", "HF_TOKEN": "t", "aws_secret_access": "s", "DB_PASSWORD": "p"})
    assert env.get("GOOD") == "1"
    assert not {"HF_TOKEN", "aws_secret_access", "DB_PASSWORD"} & set(env)
    assert set(env) - {"GOOD"} <= set(process.ENV_ALLOW)


# -- network -------------------------------------------------------------------------------

NET_PROBE = """
import socket
import torch

def entry(port):
    p = int(port.item())
    ok = 0
    try:
        s = socket.create_connection(("127.0.0.1", p), timeout=2)
        s.sendall(b"leak")
        s.close()
        ok = 1
    except OSError:
        pass
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(2)
        s.connect(("127.0.0.1", p))
        ok += 2
    except OSError:
        pass
    return torch.tensor([ok])
"""


@pytest.mark.parametrize("mode", ["namespace", "python_guard"])
def test_worker_cannot_connect_to_localhost(tmp_path, request, mode):
    if mode == "python_guard":
        request.getfixturevalue("no_namespaces")
    elif not process.unshare_prefix():
        pytest.skip("unshare is not available on this host")
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    server.settimeout(0.2)
    port = server.getsockname()[1]
    # sanity: the server is reachable from the evaluator itself
    with socket.create_connection(("127.0.0.1", port), timeout=2):
        pass
    server.accept()[0].close()
    w = _worker_with(tmp_path, NET_PROBE)
    try:
        out = _run(w, torch.tensor([port]))["outputs"][0].tolist()
        if mode == "namespace":
            assert w.containment["network"].startswith("network namespace")
            assert w.containment["pid_namespace"] is True
        else:
            assert "socket guard" in w.containment["network"]
    finally:
        w.close()
    assert out == [0]
    with pytest.raises(socket.timeout):
        server.accept()
    server.close()


# -- working directory -------------------------------------------------------------------

CWD_PROBE = """
import os
import tempfile
import torch

def entry(x):
    text = "\\n".join([os.getcwd(), os.environ.get("HOME", ""), os.environ.get("TMPDIR", ""),
                      tempfile.gettempdir(), os.path.realpath(__file__)])
    return torch.tensor(list(text.encode()), dtype=torch.uint8)
"""


def test_worker_cwd_is_its_own_temp_dir(tmp_path):
    w = _worker_with(tmp_path, CWD_PROBE)
    try:
        tmp = w.tmp
        assert tmp is not None
        cwd, home, tmpdir, gettemp, cand = _decode_text(_run(w, torch.zeros(1))["outputs"][0]).split("\n")
    finally:
        w.close()
    real = os.path.realpath(tmp)
    assert os.path.realpath(cwd) == real
    assert os.path.realpath(home) == real
    assert os.path.realpath(tmpdir) == real
    assert os.path.realpath(gettemp) == real
    assert os.path.dirname(cand) == real  # it imported the staged copy, not the original
    assert real != os.path.realpath(os.getcwd())
    assert os.path.basename(real).startswith("assay-worker-")
    assert not tmp.exists()  # close() removes it


# -- hangs and children --------------------------------------------------------------------

HANG = """
import os
import subprocess
import time
import torch

def entry(x):
    subprocess.Popen(["sleep", "{marker_a}"])  # same process group
    subprocess.Popen(["sleep", "{marker_b}"], start_new_session=True)  # tries to escape it
    open("spawned", "w").write("yes")
    time.sleep(1000)
    return x
"""


def _procs_with(marker: str) -> list[int]:
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read()
            with open(f"/proc/{d}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in cmd and state != "Z":
            found.append(int(d))
    return found


def _wait_gone(marker: str, within: float = 3.0) -> list[int]:
    deadline = time.monotonic() + within
    while True:
        left = _procs_with(marker)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


@pytest.mark.parametrize("mode", ["namespace", "no_namespace"])
def test_hang_is_killed_with_its_children(tmp_path, request, mode):
    if mode == "no_namespace":
        request.getfixturevalue("no_namespaces")
    elif not process.unshare_prefix():
        pytest.skip("unshare is not available on this host")
    # unique sleep lengths mark the children in /proc
    tag = uuid.uuid4().int % 10**6
    marker_a, marker_b = f"1000.{tag:06d}1", f"1000.{tag:06d}2"
    w = _worker_with(tmp_path, HANG.format(marker_a=marker_a, marker_b=marker_b))
    pid = w.proc.pid
    tmp = w.tmp
    try:
        timeout = 2.0
        t0 = time.monotonic()
        with pytest.raises(WorkerDied) as ei:
            w.request({"op": "run", "inputs": [torch.zeros(1)]}, timeout=timeout)
        elapsed = time.monotonic() - t0
        assert ei.value.kind == "timeout"
        assert elapsed < timeout + 3.0, elapsed
        assert (tmp / "spawned").exists(), "the candidate did not get to spawn its children"
        assert w.proc is None
        assert not os.path.exists(f"/proc/{pid}")  # the worker itself was killed and reaped
        assert _wait_gone(marker_a) == [], "child in the worker's process group survived"
        if mode == "namespace" or w._cgroup is not None:
            assert _wait_gone(marker_b) == [], "setsid child survived"
        # else: no pid namespace and no cgroup, a setsid child can escape the process group
    finally:
        w.close()
        for p in _procs_with(marker_a) + _procs_with(marker_b):  # never leave our sleepers behind
            try:
                os.kill(p, 9)
            except ProcessLookupError:
                pass


def test_worker_cgroup_is_removed(tmp_path):
    w = _worker_with(tmp_path, CWD_PROBE)
    cg = w._cgroup
    w.close()
    if cg is not None:
        assert not cg.exists()


def test_crash_is_reported(tmp_path):
    w = _worker_with(tmp_path, "import os\ndef entry(x):\n    os._exit(7)\n")
    try:
        with pytest.raises(WorkerDied) as ei:
            w.request({"op": "run", "inputs": [torch.zeros(1)]}, timeout=10)
        assert ei.value.kind == "crash"
        assert "status 7" in ei.value.message or "died" in ei.value.message
    finally:
        w.close()


def test_worker_sending_oversized_header_is_a_protocol_error(tmp_path):
    src = """
    import os, struct, time

    def entry(x):
        os.write(4, struct.pack("<Q", 1 << 40))
        time.sleep(30)
    """
    w = _worker_with(tmp_path, src)
    try:
        t0 = time.monotonic()
        with pytest.raises(WorkerDied) as ei:
            w.request({"op": "run", "inputs": [torch.zeros(1)]}, timeout=10)
        assert ei.value.kind == "protocol"
        assert time.monotonic() - t0 < 8
    finally:
        w.close()


def test_worker_output_over_max_bytes_is_a_protocol_error(tmp_path):
    w = _worker_with(tmp_path, "import torch\ndef entry(x):\n    return torch.zeros(1 << 16)\n")
    try:
        with pytest.raises(WorkerDied) as ei:
            w.request({"op": "run", "inputs": [torch.zeros(1)]}, timeout=10, max_bytes=1024)
        assert ei.value.kind == "protocol"
        assert "cap" in ei.value.message
    finally:
        w.close()


# -- protocol: round trips -----------------------------------------------------------------

def _layouts() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    base = torch.randn(8, 10, generator=g)
    return {
        "contiguous": torch.randn(3, 4, generator=g),
        "transposed": base.t(),
        "strided": base[::2, ::3],
        "offset": torch.randn(100, generator=g)[7:27].view(4, 5),
        "offset_transposed": torch.randn(60, generator=g)[10:40].view(5, 6).t(),
        "expanded": torch.randn(3, 1, generator=g).expand(3, 5),
        "expanded_front": torch.randn(4, generator=g).expand(2, 3, 4),
        "scalar": torch.tensor(3.5),
        "empty": torch.empty(0, 5),
        "empty_offset": torch.randn(10, generator=g)[4:4],
        "bfloat16": torch.randn(6, 4, generator=g).to(torch.bfloat16).t(),
        "float16": torch.randn(5, generator=g).half(),
        "bool": (torch.randn(4, 6, generator=g) > 0)[:, 1::2],
        "int64": torch.arange(-20, 40).view(6, 10)[1:, ::4],
        "int64_big": torch.tensor([2**62, -(2**62), 0, -1]),
        "uint8": torch.arange(256, dtype=torch.uint8),
        "int32_expanded": torch.tensor([[1], [2]], dtype=torch.int32).expand(2, 7),
        "float64": torch.randn(3, 3, dtype=torch.float64, generator=g).t(),
        "complex64": torch.randn(4, dtype=torch.complex64, generator=g),
    }


def _roundtrip(obj):
    header, buffers = P.encode(obj)
    return P.decode(header, [bytes(b) for b in buffers])


@pytest.mark.parametrize("name", list(_layouts()))
def test_protocol_roundtrip_keeps_values_and_strides(name):
    t = _layouts()[name]
    got = _roundtrip(t)
    assert isinstance(got, torch.Tensor)
    assert got.dtype == t.dtype
    assert got.shape == t.shape
    assert got.stride() == t.stride()
    if t.numel():
        assert got.storage_offset() == t.storage_offset()
    assert torch.equal(got, t)


def test_protocol_roundtrip_nested_objects():
    ts = _layouts()
    obj = {"a": [ts["transposed"], (ts["bool"], ts["int64"])], "f": math.inf, "g": -math.inf,
           "n": math.nan, "s": "text", "i": 3, "b": True, "none": None, 5: "int key"}
    got = _roundtrip(obj)
    assert torch.equal(got["a"][0], ts["transposed"]) and got["a"][0].stride() == ts["transposed"].stride()
    assert torch.equal(got["a"][1][0], ts["bool"]) and torch.equal(got["a"][1][1], ts["int64"])
    assert got["f"] == math.inf and got["g"] == -math.inf and math.isnan(got["n"])
    assert (got["s"], got["i"], got["b"], got["none"], got["5"]) == ("text", 3, True, None, "int key")
    odd = _roundtrip([object()])[0]
    assert odd["__type__"] == "object" and "__repr__" in odd


def test_protocol_decoded_tensor_is_independent_of_buffer():
    t = torch.arange(6.0)
    header, buffers = P.encode(t)
    raw = bytearray(bytes(buffers[0]))
    got = P.decode(header, [raw])
    raw[:] = b"\0" * len(raw)
    assert torch.equal(got, torch.arange(6.0))
    got += 1  # writable
    assert torch.equal(t, torch.arange(6.0))


def test_protocol_send_recv_over_pipe_with_large_tensor():
    r, w = os.pipe()
    t = torch.randn(512, 1024).t()[::2]  # 2 MiB span, bigger than a pipe buffer
    obj = {"x": t, "y": torch.ones(3, dtype=torch.bfloat16)}
    th = threading.Thread(target=lambda: P.send(w, obj))
    th.start()
    try:
        got = P.recv(r, timeout=10)
    finally:
        th.join()
        os.close(r)
        os.close(w)
    assert torch.equal(got["x"], t) and got["x"].stride() == t.stride()
    assert torch.equal(got["y"], obj["y"])


def test_protocol_bool_bytes_are_normalised():
    header = json.dumps({"body": {"__tensor__": 0, "dtype": "bool", "size": [4], "stride": [1], "span": 4},
                         "buffers": [4]}).encode()
    got = P.decode(header, [b"\x00\x07\x00\x01"])
    assert got.tolist() == [False, True, False, True]
    assert torch.equal(got, torch.tensor([False, True, False, True]))


# -- protocol: hostile messages ------------------------------------------------------------

def _recv_raw(data: bytes, max_bytes: int = 1 << 20, timeout: float = 2.0):
    r, w = os.pipe()
    th = threading.Thread(target=lambda: (_write(w, data), os.close(w)))
    th.start()
    try:
        return P.recv(r, timeout=timeout, max_bytes=max_bytes)
    finally:
        th.join()
        os.close(r)


def _write(fd: int, data: bytes) -> None:
    try:
        P._write_all(fd, data)
    except BrokenPipeError:
        pass  # the reader gave up early, as it should


def _msg(meta, buffers: list[bytes] = (), hlen: int | None = None) -> bytes:
    header = meta if isinstance(meta, bytes) else json.dumps(meta).encode()
    return struct.pack("<Q", len(header) if hlen is None else hlen) + header + b"".join(buffers)


def _tensor_meta(**kw):
    rec = {"__tensor__": 0, "dtype": "float32", "size": [4], "stride": [1], "span": 4}
    rec.update(kw)
    return rec


HOSTILE = {
    "header_length_huge": _msg(b"{}", hlen=1 << 40),
    "buffers_over_max_bytes": _msg({"body": None, "buffers": [1 << 30]}),
    "buffers_sum_over_max_bytes": _msg({"body": None, "buffers": [1 << 19, 1 << 19, 1 << 19]}),
    "negative_buffer": _msg({"body": None, "buffers": [-5]}),
    "buffers_not_a_list": _msg({"body": None, "buffers": 5}),
    "buffers_null": _msg({"body": None, "buffers": None}),
    "buffer_size_float": _msg({"body": None, "buffers": [4.5]}),
    "not_json": _msg(b"\xff\xfe not json"),
    "json_list": _msg(b"[1, 2]"),
    "no_buffers_key": _msg({"body": None}),
    "deeply_nested": _msg(b"[" * 100_000),
    "no_body": _msg({"buffers": []}),
    "bad_float": _msg({"body": {"__float__": "abc"}, "buffers": []}),
    "unknown_dtype": _msg({"body": _tensor_meta(dtype="object"), "buffers": [16]}, [b"\0" * 16]),
    "buffer_index_out_of_range": _msg({"body": _tensor_meta(__tensor__=3), "buffers": [16]}, [b"\0" * 16]),
    "buffer_size_mismatch": _msg({"body": _tensor_meta(), "buffers": [12]}, [b"\0" * 12]),
    "span_inconsistent": _msg({"body": _tensor_meta(span=2, size=[4]), "buffers": [8]}, [b"\0" * 8]),
    "negative_stride": _msg({"body": _tensor_meta(stride=[-1]), "buffers": [16]}, [b"\0" * 16]),
    "size_stride_rank_mismatch": _msg({"body": _tensor_meta(stride=[1, 1]), "buffers": [16]}, [b"\0" * 16]),
    "negative_offset": _msg({"body": _tensor_meta(offset=-2, span=4), "buffers": [16]}, [b"\0" * 16]),
    # span 0 claims an empty tensor: must not become torch.empty(2**40 floats)
    "empty_claim_huge_size": _msg({"body": _tensor_meta(size=[1 << 40], span=0), "buffers": [0]}),
    "size_overflows_int64": _msg({"body": _tensor_meta(size=[1 << 70], stride=[0], span=1), "buffers": [4]},
                                 [b"\0" * 4]),
    "size_not_a_list": _msg({"body": _tensor_meta(size="abcd"), "buffers": [16]}, [b"\0" * 16]),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_protocol_rejects_hostile_message(name):
    t0 = time.monotonic()
    with pytest.raises(P.ProtocolError):
        _recv_raw(HOSTILE[name])
    assert time.monotonic() - t0 < 2.0


def test_protocol_timeout_and_close():
    r, w = os.pipe()
    try:
        t0 = time.monotonic()
        with pytest.raises(P.PeerTimeout):
            P.recv(r, timeout=0.3)
        assert time.monotonic() - t0 < 1.5
        os.write(w, struct.pack("<Q", 100) + b"{")  # truncated message, then close
        os.close(w)
        w = -1
        with pytest.raises(P.PeerClosed):
            P.recv(r, timeout=2)
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)


def test_protocol_errors_are_protocol_errors():
    assert issubclass(P.PeerTimeout, P.ProtocolError)
    assert issubclass(P.PeerClosed, P.ProtocolError)


ORPHAN_EVALUATOR = """
import sys, time
from pathlib import Path
import torch
from assay.sandbox import process
if sys.argv[2] == "no_namespace":
    process.unshare_prefix = lambda *a, **k: ()
w = process.Worker()
w.start()
staged = w.stage_file(Path(sys.argv[1]))
assert w.request({"op": "load", "path": str(staged), "entry": "entry", "device": "cpu"}, timeout=60)["ok"]
w.send({"op": "run", "inputs": [torch.zeros(1)]}, 600)
while not (w.tmp / "spawned").exists():
    time.sleep(0.05)
print(w.proc.pid, flush=True)
time.sleep(600)
"""


def _ended(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


@pytest.mark.parametrize("mode", ["namespace", "no_namespace"])
def test_worker_dies_with_its_evaluator_even_by_sigkill(tmp_path, mode):
    """An evaluator killed with SIGKILL cannot clean up: the worker (PR_SET_PDEATHSIG) goes with
    it, and in a pid namespace everything the candidate started goes too."""
    if mode == "namespace" and not process.unshare_prefix():
        pytest.skip("unshare is not available on this host")
    tag = uuid.uuid4().int % 10**6
    marker_a, marker_b = f"1000.{tag:06d}3", f"1000.{tag:06d}4"
    (tmp_path / "cand.py").write_text(textwrap.dedent(HANG.format(marker_a=marker_a, marker_b=marker_b)))
    (tmp_path / "evaluator.py").write_text(ORPHAN_EVALUATOR)
    ev = subprocess.Popen([sys.executable, str(tmp_path / "evaluator.py"), str(tmp_path / "cand.py"), mode],
                          stdout=subprocess.PIPE, text=True)
    try:
        worker_pid = int(ev.stdout.readline())
        assert _procs_with(marker_a), "the candidate did not get to spawn its children"
        ev.kill()
        ev.wait(timeout=30)
        deadline = time.monotonic() + 10
        while not _ended(worker_pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _ended(worker_pid), "the worker outlived its evaluator"
        if mode == "namespace":
            assert _wait_gone(marker_a) == [] and _wait_gone(marker_b) == [], "the candidate's children survived"
    finally:
        ev.kill()
        ev.stdout.close()
        for p in _procs_with(marker_a) + _procs_with(marker_b):
            try:
                os.kill(p, 9)
            except ProcessLookupError:
                pass
