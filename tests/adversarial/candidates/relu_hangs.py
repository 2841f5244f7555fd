"""WRONG robustness: never returns (an infinite loop inside the call)."""


def relu(x):
    n = 0
    while True:
        n += 1
