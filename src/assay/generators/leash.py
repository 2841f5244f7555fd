"""Runs a coding agent's shell command so that it cannot outlive the search that started it.

Started by ``AgentGenerator`` as ``python -I leash.py PARENT_PID COMMAND`` in a session of its
own: it asks Linux for SIGUSR1 when its parent dies (``PR_SET_PDEATHSIG``; a ``kill -9`` of
``assay optimize`` included) and then SIGKILLs its whole process group, the agent and whatever
the agent started. SIGTERM (the generator's timeout) is left to the agent to handle. A script
of the standard library only: it runs in the agent's scrubbed environment.
"""

import ctypes
import os
import signal
import subprocess
import sys

PR_SET_PDEATHSIG = 1


def _end_group(*_: object) -> None:
    os.killpg(0, signal.SIGKILL)


def main() -> int:
    parent, command = int(sys.argv[1]), sys.argv[2]
    signal.signal(signal.SIGUSR1, _end_group)
    signal.signal(signal.SIGTERM, lambda *_: None)  # the agent gets it too; its grace period applies
    try:
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, int(signal.SIGUSR1), 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # the search died before the request above
        _end_group()
    rc = subprocess.Popen(command, shell=True).wait()
    return rc if rc >= 0 else 128 - rc


if __name__ == "__main__":
    sys.exit(main())
