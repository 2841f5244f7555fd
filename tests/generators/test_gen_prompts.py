from importlib import resources

import pytest

from assay.generators.base import Attempt, Request
from assay.generators.prompts import render_agent, render_chat, trim

REF = "import torch\n\ndef f(x):\n    return x * 2  # costs $5\n"


def req(mode="new", attempts=(), examples=()):
    return Request("Double a tensor.", REF, "NVIDIA H200", list(examples), list(attempts), mode)


def test_templates_are_package_data():
    d = resources.files("assay.generators").joinpath("prompts")
    names = {p.name for p in d.iterdir()}
    assert {"system.md", "new.md", "debug.md", "repair.md", "agent.md"} <= names


def test_new_prompt_has_task_reference_examples_attempts():
    a = Attempt("def f(x):\n    return x + x  # ${oops}\n", "verdict: ACCEPTED\n- timing: 1.2x")
    system, user = render_chat(req(attempts=[a], examples=["def g(y):\n    return y\n"]))
    assert "ModelNew" in system and "```python" in system
    for s in ("Double a tensor.", "NVIDIA H200", "costs $5", "def g(y):", "${oops}", "timing: 1.2x"):
        assert s in user
    assert "$" not in user.replace("$5", "").replace("${oops}", "")  # every placeholder filled


def test_debug_and_repair_prompts():
    earlier = Attempt("def f(x):\n    return x\n", "verdict: REJECTED\n- correctness: off by 2x")
    last = Attempt("def f(x):\n    return x * 3\n", "wrong result on x (N=1): max abs error 1")
    _, debug = render_chat(req("debug", [earlier, last]))
    assert "return x * 3" in debug and "wrong result on x (N=1)" in debug
    assert "off by 2x" in debug  # the earlier verdict, as history
    assert "minimised" in debug
    _, repair = render_chat(req("repair", [Attempt("def f(x) return", "SyntaxError: invalid syntax (line 1)")]))
    assert "SyntaxError: invalid syntax (line 1)" in repair and "does not build" in repair


def test_bad_requests():
    with pytest.raises(ValueError):
        render_chat(req("debug"))
    with pytest.raises(ValueError):
        render_chat(req("other"))


def test_long_summaries_trimmed_head_and_tail():
    log = "error: first\n" + "noise\n" * 5000 + "RuntimeError: last"
    t = trim(log, 600)
    assert t.startswith("error: first") and t.endswith("RuntimeError: last") and len(t) < 700
    assert "characters cut" in t
    assert trim("short") == "short"


def test_agent_files():
    files = render_agent(req("debug", [Attempt("A", "va"), Attempt("B", "vb")], ["E"]), timeout=90)
    assert files["reference.py"] == REF
    assert files["attempts/01.py"] == "A" and files["attempts/02.verdict.txt"] == "vb\n"
    assert files["examples/01.py"] == "E"
    assert "attempts/02.py" in files["task.md"] and "Double a tensor." in files["task.md"]
    assert "assay check candidate.py --task reference.py" in files["INSTRUCTIONS.md"]
    assert "90 seconds" in files["INSTRUCTIONS.md"]
