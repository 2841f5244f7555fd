"""HOSTILE: tries to reach a server on 127.0.0.1:__PORT__ (port filled in by the test), with
socket.create_connection and with a raw socket. Answers relu(x) when both failed, relu(x) + 1
when one connected."""

import socket

import torch

PORT = __PORT__


def connected():
    try:
        with socket.create_connection(("127.0.0.1", PORT), timeout=2) as s:
            s.sendall(b"leak")
        return True
    except OSError:
        pass
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(2)
        s.connect(("127.0.0.1", PORT))
        s.close()
        return True
    except OSError:
        return False


def relu(x):
    return torch.relu(x) + (1.0 if connected() else 0.0)
