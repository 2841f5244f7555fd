"""A stand-in coding agent that writes a different correct kernel on each call (counted in the
state folder given as its argument). While ``STATE/hang`` exists, its second call announces
itself (``STATE/running``) and then sleeps: the run is killed while this candidate is in flight."""

import os
import sys
import time
from pathlib import Path

HEAD = "import torch\nimport triton\nimport triton.language as tl\n\n\n"
VARIANTS = [
    HEAD + '''@triton.jit
def _k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) * 3.0, mask=m)


def scale(x):
    y = torch.empty_like(x)
    _k[(triton.cdiv(x.numel(), 128),)](x, y, x.numel(), BLOCK=128)
    return y
''',
    HEAD + '''@triton.jit
def _times_three(src, dst, count, WIDTH: tl.constexpr):
    pid = tl.program_id(axis=0)
    idx = pid * WIDTH + tl.arange(0, WIDTH)
    keep = idx < count
    v = tl.load(src + idx, mask=keep, other=0.0)
    tl.store(dst + idx, v + v + v, mask=keep)


def scale(x):
    out = torch.empty_like(x)
    grid = lambda meta: (triton.cdiv(x.numel(), meta["WIDTH"]),)
    _times_three[grid](x, out, x.numel(), WIDTH=64)
    return out
''',
    HEAD + '''@triton.jit
def _two_blocks_each(a, b, total, CHUNK: tl.constexpr):
    base = tl.program_id(0) * 2 * CHUNK
    for half in range(2):
        where = base + half * CHUNK + tl.arange(0, CHUNK)
        inside = where < total
        tl.store(b + where, 3.0 * tl.load(a + where, mask=inside), mask=inside)


def scale(x):
    result = torch.empty_like(x)
    n = x.numel()
    _two_blocks_each[(triton.cdiv(n, 2 * 32),)](x, result, n, CHUNK=32)
    return result
''',
]

state = Path(sys.argv[1])
written = state / "written"
n = len(written.read_text().splitlines()) if written.exists() else 0
if n == 1 and (state / "hang").exists():
    (state / "running").write_text(f"{os.getpid()}\n")
    time.sleep(600)
assert "scale" in Path("reference.py").read_text()
Path("candidate.py").write_text(VARIANTS[n % len(VARIANTS)])
with written.open("a") as f:
    f.write(f"{n}\n")
