"""Landlock (Linux >= 5.13): the worker forbids itself to write outside an allow-list of folders,
and (ABI >= 4) to bind or connect TCP sockets. Applied inside the worker before the candidate
is imported; irreversible for the process and everything it starts. Pure ctypes, no deps.
"""

from __future__ import annotations

import ctypes
import os
import struct

_SYS_CREATE, _SYS_ADD_RULE, _SYS_RESTRICT = 444, 445, 446  # x86-64 and arm64 share these numbers
_PR_SET_NO_NEW_PRIVS = 38
_RULE_PATH_BENEATH = 1

# filesystem rights that change the filesystem (reads and ioctls stay unrestricted)
_WRITE_FILE, _REMOVE_DIR, _REMOVE_FILE = 1 << 1, 1 << 4, 1 << 5
_MAKE_ALL = sum(1 << b for b in range(6, 13))  # char, dir, reg, sock, fifo, block, sym
_REFER, _TRUNCATE = 1 << 13, 1 << 14
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1


def abi_version() -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    return int(libc.syscall(_SYS_CREATE, None, ctypes.c_size_t(0), ctypes.c_uint32(1)))


def restrict_writes(writable: list[str]) -> str:
    """Allow writes only beneath ``writable``; return a one-line description of what holds."""
    libc = ctypes.CDLL(None, use_errno=True)
    abi = abi_version()
    if abi < 1:
        return "landlock unavailable"
    fs = _WRITE_FILE | _REMOVE_DIR | _REMOVE_FILE | _MAKE_ALL
    if abi >= 2:
        fs |= _REFER
    if abi >= 3:
        fs |= _TRUNCATE
    net = _NET_BIND_TCP | _NET_CONNECT_TCP if abi >= 4 else 0
    attr = struct.pack("QQ", fs, net) if abi >= 4 else struct.pack("Q", fs)
    buf = ctypes.create_string_buffer(attr, len(attr))
    fd = libc.syscall(_SYS_CREATE, buf, ctypes.c_size_t(len(attr)), ctypes.c_uint32(0))
    if fd < 0:
        return f"landlock ruleset failed: {os.strerror(ctypes.get_errno())}"
    try:
        for path in writable:
            if not os.path.exists(path):
                continue
            pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                rights = fs if os.path.isdir(path) else fs & (_WRITE_FILE | _TRUNCATE)
                rule = ctypes.create_string_buffer(struct.pack("=Qi", rights, pfd), 12)
                if libc.syscall(_SYS_ADD_RULE, ctypes.c_int(fd), ctypes.c_int(_RULE_PATH_BENEATH), rule,
                                ctypes.c_uint32(0)) < 0:
                    return f"landlock rule for {path} failed: {os.strerror(ctypes.get_errno())}"
            finally:
                os.close(pfd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return "landlock: no_new_privs failed"
        if libc.syscall(_SYS_RESTRICT, ctypes.c_int(fd), ctypes.c_uint32(0)) < 0:
            return f"landlock restrict failed: {os.strerror(ctypes.get_errno())}"
    finally:
        os.close(fd)
    tcp = "; TCP bind/connect denied" if net else ""
    return f"landlock ABI {abi}: writes only beneath {len(writable)} allowed folders{tcp}"
