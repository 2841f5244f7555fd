"""WRONG integrity: the output is right when the call returns, but a background thread keeps
writing into it afterwards (here: it recycles the buffer 20 ms later, as a ring-buffer
"prefetch" would). Values read at once are correct; the output is not stable."""

import threading
import time

import torch


def relu(x):
    out = torch.relu(x)

    def recycle():
        time.sleep(0.02)
        out.zero_()

    threading.Thread(target=recycle, daemon=True).start()
    return out
