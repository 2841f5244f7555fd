from assay.generators.extract import extract_code, fenced_blocks

MODEL = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
FUNC = "import torch\n\n\ndef softmax(x):\n    return x\n"


def test_last_python_block_wins():
    text = f"first\n```python\n{FUNC}```\nbetter:\n```python\n{FUNC.replace('return x', 'return x + 0')}```\n"
    assert extract_code(text) == FUNC.replace("return x", "return x + 0")


def test_plain_and_py_fences_count():
    assert extract_code(f"```\n{FUNC}```") == FUNC
    assert extract_code(f"```py\n{FUNC}```") == FUNC
    assert extract_code(f"````python\n{FUNC}````") == FUNC


def test_other_languages_and_non_definitions_are_not_candidates():
    text = f"```python\n{MODEL}```\n\nRun it:\n```bash\npython -c 'def f(): pass'\n```\n```python\nprint(ModelNew()(x))\n```\n"
    assert extract_code(text) == MODEL
    assert extract_code("```cuda\n__global__ void k() {}\n```") is None


def test_model_new_beats_a_later_helper_block():
    text = f"```python\n{MODEL}```\nA helper to test it:\n```python\ndef check():\n    pass\n```\n"
    assert extract_code(text) == MODEL


def test_entry_name_preferred():
    helper = "def _helper(x):\n    return x\n"
    text = f"```python\n{FUNC}```\n```python\n{helper}```"
    assert extract_code(text, entry="softmax") == FUNC
    assert extract_code(text) == helper  # no entry given: the last block that defines a function


def test_none_cases():
    assert extract_code("") is None
    assert extract_code("no code here, only `inline` text") is None
    assert extract_code("```python\nx = 1\n```") is None  # defines nothing
    assert extract_code(f"```python\n{FUNC}") is None  # unclosed: cut off by the token limit


def test_think_blocks_skipped():
    draft = "def draft(x):\n    return 0\n"
    assert extract_code(f"<think>\n```python\n{draft}```\n</think>\nAnswer:\n```python\n{FUNC}```") == FUNC
    assert extract_code(f"<think>\n```python\n{draft}```\n") is None  # still thinking when cut off


def test_syntax_errors_are_still_extracted():
    broken = "def softmax(x)\n    return x\n"  # a build failure is feedback for a repair round
    assert extract_code(f"```python\n{broken}```") == broken


def test_fenced_blocks_tags():
    blocks = fenced_blocks("```Python title=a.py\nA\n```\ntext\n~~~\n```\nB\n```")
    assert blocks == [("python", "A"), ("", "B")]
