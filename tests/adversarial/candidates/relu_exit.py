"""WRONG robustness: ends the worker process from inside the call (os._exit(0): no exception)."""

import os


def relu(x):
    os._exit(0)
