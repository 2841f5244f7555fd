"""The LLM generators through the real openai/anthropic SDKs against a replaying local server."""

from __future__ import annotations

import pytest

from assay.errors import UserError
from assay.generators.base import Attempt, GeneratorError, Proposal, Request
from assay.generators.llm import AnthropicGenerator, OpenAIGenerator, make_generator
from assay.generators.prompts import trim

REFERENCE = '''import torch
import assay


def softmax(x):
    return torch.softmax(x, dim=-1)


task = assay.Task(name="softmax_small", reference=softmax,
                  dims={"M": assay.Dim(1, 64), "N": assay.Dim(1, 1024)},
                  inputs=[assay.Input("x", ("M", "N"))],
                  workloads=[assay.Workload({"M": 32, "N": 1000})], dtypes=["float32"])
'''
HARDWARE = "NVIDIA H200 (sm_90, 132 SMs, 141 GB HBM3e at 4.8 TB/s)"
FAST = {"base_delay": 0.001, "max_delay": 0.01}  # the retry policy, with tiny delays


def request(mode: str = "new", attempts: tuple[Attempt, ...] = ()) -> Request:
    return Request(task_description="Row softmax over the last dimension of a 2-D float32 tensor.",
                   reference_source=REFERENCE, hardware=HARDWARE, examples=[], attempts=list(attempts),
                   mode=mode)  # type: ignore[arg-type]


def openai_gen(**kw) -> OpenAIGenerator:
    return OpenAIGenerator("gpt-4.1", **{"price_in": 2e-6, "price_out": 8e-6, **FAST, **kw})


def anthropic_gen(**kw) -> AnthropicGenerator:
    return AnthropicGenerator("claude-kernel-test", **{"price_in": 3e-6, "price_out": 15e-6, **FAST, **kw})


# --- OpenAI --------------------------------------------------------------------------------

def test_openai_good_kernel(serve, kernel):
    srv = serve("openai_good_kernel")
    gen = openai_gen()
    p = gen.propose(request())
    assert isinstance(p, Proposal)
    assert p.source == kernel("good.py")
    assert "Plan:" in p.raw and "Plan:" not in p.source
    assert (p.generator, p.model) == ("openai:gpt-4.1", "gpt-4.1")
    assert (p.tokens_in, p.tokens_out) == (1812, 604)
    assert p.cost_usd == pytest.approx(1812 * 2e-6 + 604 * 8e-6)
    assert len(p.prompt_hash) == 16
    # what the server received
    assert len(srv.requests) == 1
    r = srv.requests[0]
    assert r["path"] == "/v1/chat/completions"
    assert r["headers"]["authorization"] == "Bearer test"
    body = r["body"]
    assert body["model"] == "gpt-4.1" and body["max_tokens"] == 8192 and body["temperature"] == 0.2
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    user = body["messages"][1]["content"]
    assert "torch.softmax(x, dim=-1)" in user and HARDWARE in user
    assert "ModelNew" in body["messages"][0]["content"]


def test_openai_compile_error_then_fix(serve, kernel, verdict_text):
    srv = serve("openai_compile_error_then_fix")
    gen = openai_gen()
    first = gen.propose(request())
    assert first.source == kernel("compile_error.py")
    summary = trim(verdict_text("compile_error.txt"))
    second = gen.propose(request("repair", (Attempt(first.source, summary),)))
    assert second.source == kernel("good.py")
    assert len(srv.requests) == 2
    text = srv.user_text(1)
    assert "arange's arguments must be of type tl.constexpr" in text
    assert summary in text
    assert "cols = tl.arange(0, n_cols)" in text  # the failing source is shown
    assert "does not build" in text
    assert first.prompt_hash != second.prompt_hash
    assert (second.tokens_in, second.tokens_out) == (2571, 655)


def test_openai_tail_mask_then_fix(serve, kernel, verdict_text):
    srv = serve("openai_tail_mask_then_fix")
    gen = openai_gen()
    first = gen.propose(request())
    assert first.source == kernel("tail_bug.py")
    failing_case = verdict_text("tail_bug.txt")
    second = gen.propose(request("debug", (Attempt(first.source, failing_case),)))
    assert second.source == kernel("good.py")
    assert len(srv.requests) == 2
    text = srv.user_text(1)
    assert failing_case.strip() in text
    assert "wrong result on x (M=1, N=3)" in text
    assert "other=0.0" in text  # the buggy source is shown
    assert "minimised" in text  # the debug template, not the repair one


def test_openai_no_code_block(serve):
    serve("openai_no_code_block")
    p = openai_gen().propose(request())
    assert p.source is None
    assert "pip show triton" in p.raw
    assert (p.tokens_in, p.tokens_out) == (1795, 77)


def test_openai_rate_limit_then_success(serve, kernel):
    srv = serve("openai_rate_limit_then_success")
    waits: list[float] = []
    gen = openai_gen(sleep=waits.append)
    p = gen.propose(request())
    assert p.source == kernel("good.py")
    assert len(srv.requests) == 2 and gen.calls == 2
    assert waits == [0.01]  # retry-after: 2 asked for more, capped at max_delay
    assert srv.requests[0]["body"] == srv.requests[1]["body"]


def test_openai_rate_limit_real_sleep(serve):
    srv = serve("openai_rate_limit_then_success")
    p = openai_gen().propose(request())  # time.sleep with the tiny delays
    assert p.source is not None and len(srv.requests) == 2


def test_openai_server_errors_exhaust_retries(serve):
    srv = serve("openai_server_errors")
    waits: list[float] = []
    gen = openai_gen(max_retries=2, base_delay=0.001, max_delay=1.0, sleep=waits.append)
    with pytest.raises(GeneratorError, match=r"gave up after 3 requests .*HTTP 500"):
        gen.propose(request())
    assert len(srv.requests) == 3
    assert waits == [0.001, 0.002]  # exponential


def test_openai_bad_key_is_user_error_without_retry(serve):
    srv = serve("openai_bad_key")
    with pytest.raises(UserError, match="OPENAI_API_KEY"):
        openai_gen().propose(request())
    assert len(srv.requests) == 1


def test_openai_options_in_request(serve):
    srv = serve("openai_good_kernel")
    OpenAIGenerator("o4-mini", temperature=None, max_tokens=1000, token_param="max_completion_tokens",
                    **FAST).propose(request())
    body = srv.requests[0]["body"]
    assert body["max_completion_tokens"] == 1000
    assert "max_tokens" not in body and "temperature" not in body


def test_connection_refused_is_retried_then_given_up(clean_llm_env):
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    clean_llm_env.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{port}/v1")
    clean_llm_env.setenv("OPENAI_API_KEY", "test")
    gen = openai_gen(max_retries=1)
    with pytest.raises(GeneratorError, match="gave up after 2 requests"):
        gen.propose(request())
    assert gen.calls == 2


def test_delay_policy(clean_llm_env):
    clean_llm_env.setenv("OPENAI_API_KEY", "test")
    g = OpenAIGenerator("m", base_delay=1.0, max_delay=10.0)
    assert [g.delay(i) for i in range(5)] == [1.0, 2.0, 4.0, 8.0, 10.0]
    assert g.delay(0, retry_after=5.0) == 5.0
    assert g.delay(0, retry_after=60.0) == 10.0


# --- Anthropic -----------------------------------------------------------------------------

def test_anthropic_good_kernel(serve, kernel):
    srv = serve("anthropic_good_kernel")
    p = anthropic_gen().propose(request())
    assert p.source == kernel("good.py")
    assert (p.generator, p.model) == ("anthropic:claude-kernel-test", "claude-kernel-test")
    assert (p.tokens_in, p.tokens_out) == (1934, 688)
    assert p.cost_usd == pytest.approx(1934 * 3e-6 + 688 * 15e-6)
    r = srv.requests[0]
    assert r["path"] == "/v1/messages"
    h = r["headers"]
    assert h.get("x-api-key") == "test" or h.get("authorization") == "Bearer test"
    assert "anthropic-version" in h
    body = r["body"]
    assert body["model"] == "claude-kernel-test" and body["max_tokens"] == 8192
    assert "ModelNew" in body["system"]
    assert [m["role"] for m in body["messages"]] == ["user"]
    assert "torch.softmax(x, dim=-1)" in srv.user_text(0)


def test_anthropic_rate_limit_then_success(serve, kernel):
    srv = serve("anthropic_rate_limit_then_success")
    waits: list[float] = []
    gen = anthropic_gen(sleep=waits.append)
    p = gen.propose(request())
    assert p.source == kernel("good.py")
    assert len(srv.requests) == 2 and len(waits) == 1


def test_anthropic_overloaded_then_success(serve, kernel):
    srv = serve("anthropic_overloaded_then_success")
    p = anthropic_gen().propose(request())
    assert p.source == kernel("good.py") and len(srv.requests) == 2


# --- keys and names ------------------------------------------------------------------------

def test_missing_openai_key_is_user_error(clean_llm_env):
    with pytest.raises(UserError) as e:
        OpenAIGenerator("gpt-4.1")
    msg = str(e.value)
    assert "OPENAI_API_KEY" in msg and "\n" not in msg


def test_missing_anthropic_key_is_user_error(clean_llm_env):
    with pytest.raises(UserError) as e:
        AnthropicGenerator("claude-kernel-test")
    assert "ANTHROPIC_API_KEY" in str(e.value) and "\n" not in str(e.value)


def test_make_generator(clean_llm_env):
    clean_llm_env.setenv("OPENAI_API_KEY", "test")
    clean_llm_env.setenv("ANTHROPIC_API_KEY", "test")
    g = make_generator("openai:qwen2.5-coder:32b", price_in=1e-6)
    assert isinstance(g, OpenAIGenerator) and g.model == "qwen2.5-coder:32b" and g.price_in == 1e-6
    assert g.name == "openai:qwen2.5-coder:32b"
    a = make_generator("anthropic:claude-other-test")
    assert isinstance(a, AnthropicGenerator) and a.model == "claude-other-test"
    from assay.generators.agent import AgentGenerator

    ag = make_generator("agent:python my_agent.py --fast", timeout=5)
    assert isinstance(ag, AgentGenerator) and ag.timeout == 5 and ag.name == "agent:python"
    for bad in ("openai", "openai:", "bogus:model", "agent:"):
        with pytest.raises(UserError):
            make_generator(bad)


def test_make_generator_missing_key(clean_llm_env):
    with pytest.raises(UserError, match="OPENAI_API_KEY"):
        make_generator("openai:gpt-4.1")


def test_anthropic_temperature_only_when_set(serve):
    srv = serve("anthropic_good_kernel")
    anthropic_gen().propose(request())
    assert "temperature" not in srv.requests[0]["body"]
    srv2 = serve("anthropic_good_kernel")
    anthropic_gen(temperature=0.3).propose(request())
    assert srv2.requests[0]["body"]["temperature"] == 0.3
