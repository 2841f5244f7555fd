"""An evaluator command for tests: dies (SIGKILL) on a candidate that asks for it, else the real one."""

import json
import os
import signal
import sys
from pathlib import Path

spec = json.loads(Path(sys.argv[1]).read_text())
if "CRASH_EVALUATOR" in Path(spec["candidate"]).read_text():
    os.kill(os.getpid(), signal.SIGKILL)

from assay.search.evaluator import main  # noqa: E402

sys.exit(main(sys.argv[1:]))
