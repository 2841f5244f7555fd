"""A stand-in coding agent: it runs in the workspace assay prepared and acts per argv[1]."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

mode = sys.argv[1]
here = Path.cwd()

if mode == "write":  # read the task like an agent would; write a candidate
    task = (here / "task.md").read_text()
    ref = (here / "reference.py").read_text()
    n_attempts = len(list((here / "attempts").glob("*.py"))) if (here / "attempts").is_dir() else 0
    assert "assay check candidate.py --task reference.py" in (here / "INSTRUCTIONS.md").read_text()
    title = next(line for line in task.splitlines() if line.strip() and not line.startswith("#"))
    (here / "candidate.py").write_text(f"# task: {title}\n# attempts seen: {n_attempts}\n"
                                       + ref.replace("torch.softmax(x, dim=-1)", "my_softmax(x)"))
    print("wrote candidate.py")
elif mode == "env":  # report the environment it was given
    (here / "candidate.py").write_text("ENV = " + json.dumps(sorted(os.environ)) + "\n")
elif mode == "sleep":
    print("thinking...", flush=True)
    time.sleep(60)
    (here / "candidate.py").write_text("def too_late(x):\n    return x\n")
elif mode == "write-then-hang":
    (here / "candidate.py").write_text("def softmax(x):\n    return x\n")
    time.sleep(60)
elif mode == "orphan":  # leave a child behind in the background
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    print(f"child {child.pid}", flush=True)
    (here / "candidate.py").write_text("def softmax(x):\n    return x\n")
elif mode == "nothing":
    print("giving up")
    sys.exit(3)
