"""LLM generators over the official SDKs: ``openai:MODEL`` and ``anthropic:MODEL``.

``OpenAIGenerator`` calls chat.completions through ``openai.OpenAI()``, which reads
``OPENAI_API_KEY`` and ``OPENAI_BASE_URL`` itself, so any OpenAI-compatible server works
(vLLM, Ollama, OpenRouter, ...). ``AnthropicGenerator`` calls messages.create through
``anthropic.Anthropic()``, which reads ``ANTHROPIC_API_KEY`` (or ``ANTHROPIC_AUTH_TOKEN``)
and ``ANTHROPIC_BASE_URL``. A missing key is a ``UserError`` when the generator is made.

Retry policy (the SDKs' own retries are off, so this is the whole policy): a rate limit
(429), a server error (5xx, including Anthropic's 529 "overloaded") or a connection error
or timeout is retried up to ``max_retries`` times, waiting ``base_delay * 2**i`` seconds
before retry ``i`` (at most ``max_delay``; a ``Retry-After`` header asks for longer, still
capped). When the retries are spent, ``GeneratorError``. An authentication, permission or
not-found error (a wrong key or model name) is a ``UserError``; any other 4xx is a
``GeneratorError`` at once.

Cost: ``tokens_in * price_in + tokens_out * price_out``, prices in USD per token
(e.g. 3e-6 for $3 per million), tokens from the response's usage.
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable

from assay.errors import UserError
from assay.generators.base import GeneratorError, Proposal, prompt_hash
from assay.generators.extract import extract_code
from assay.generators.prompts import render_chat


class _LLMGenerator:
    provider = ""
    key_vars: tuple[str, ...] = ()
    base_url_var = ""

    def __init__(self, model: str, temperature: float | None = 0.2, max_tokens: int = 8192,
                 price_in: float = 0.0, price_out: float = 0.0, *, max_retries: int = 4,
                 base_delay: float = 2.0, max_delay: float = 60.0, timeout: float = 600.0,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if not model:
            raise UserError(f"{self.provider}: name a model, e.g. {self.provider}:MODEL")
        if not any(os.environ.get(v) for v in self.key_vars):
            raise UserError(f"{self.provider}:{model} needs {self.key_vars[0]} in the environment"
                            f" (for another server, set {self.base_url_var} too)")
        if max_retries < 0 or base_delay < 0 or max_delay < 0:
            raise ValueError("max_retries, base_delay and max_delay must be >= 0")
        self.model, self.temperature, self.max_tokens = model, temperature, max_tokens
        self.price_in, self.price_out = price_in, price_out
        self.max_retries, self.base_delay, self.max_delay = max_retries, base_delay, max_delay
        self.timeout = timeout
        self._sleep = sleep
        self.name = f"{self.provider}:{model}"
        self.calls = 0  # HTTP requests made, retries included
        self.client = self._client()

    # --- provider specifics -------------------------------------------------------------
    def _client(self) -> Any:
        raise NotImplementedError

    def _complete(self, system: str, user: str) -> tuple[str, int, int]:
        """One request: (reply text, tokens in, tokens out)."""
        raise NotImplementedError

    def _errors(self) -> tuple[type[BaseException], type[BaseException]]:
        """The SDK's (APIStatusError, APIConnectionError)."""
        raise NotImplementedError

    # --- the policy ---------------------------------------------------------------------
    def delay(self, retry: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number ``retry`` (0-based)."""
        d = self.base_delay * (2 ** retry)
        if retry_after is not None:
            d = max(d, retry_after)
        return min(d, self.max_delay)

    def _call(self, system: str, user: str) -> tuple[str, int, int]:
        status_error, connection_error = self._errors()
        retry = 0
        while True:
            self.calls += 1
            try:
                return self._complete(system, user)
            except status_error as e:
                code = int(getattr(e, "status_code", 0) or 0)
                what = f"HTTP {code}: {_message(e)}"
                if code in (401, 403):
                    raise UserError(f"{self.name}: the server refused the credentials ({what});"
                                    f" check {self.key_vars[0]}") from None
                if code == 404:
                    raise UserError(f"{self.name}: not found ({what}); check the model name"
                                    f" and {self.base_url_var}") from None
                if not (code == 429 or code >= 500):
                    raise GeneratorError(f"{self.name}: request rejected ({what})") from None
                retry_after = _retry_after(e)
            except connection_error as e:
                what = f"{type(e).__name__}: {_message(e)}"
                retry_after = None
            if retry >= self.max_retries:
                raise GeneratorError(f"{self.name}: gave up after {retry + 1} requests ({what})")
            self._sleep(self.delay(retry, retry_after))
            retry += 1

    def propose(self, req: Any) -> Proposal:
        system, user = render_chat(req)
        text, tokens_in, tokens_out = self._call(system, user)
        return Proposal(source=extract_code(text), generator=self.name, model=self.model,
                        prompt_hash=prompt_hash(system, user), tokens_in=tokens_in, tokens_out=tokens_out,
                        cost_usd=tokens_in * self.price_in + tokens_out * self.price_out, raw=text)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model!r})"


class OpenAIGenerator(_LLMGenerator):
    """chat.completions of an OpenAI-compatible server.

    ``token_param``: the request field for the reply's token limit, ``max_tokens`` (what
    every compatible server reads) or ``max_completion_tokens`` (what OpenAI's reasoning
    models require). ``temperature=None`` leaves it out of the request.
    """

    provider = "openai"
    key_vars = ("OPENAI_API_KEY",)
    base_url_var = "OPENAI_BASE_URL"

    def __init__(self, model: str, temperature: float | None = 0.2, max_tokens: int = 8192,
                 price_in: float = 0.0, price_out: float = 0.0, *,
                 token_param: str = "max_tokens", **policy: Any) -> None:
        if token_param not in ("max_tokens", "max_completion_tokens"):
            raise ValueError("token_param is max_tokens or max_completion_tokens")
        self.token_param = token_param
        super().__init__(model, temperature, max_tokens, price_in, price_out, **policy)

    def _client(self) -> Any:
        import openai

        try:
            return openai.OpenAI(max_retries=0, timeout=self.timeout)
        except openai.OpenAIError as e:
            raise UserError(f"{self.name}: {e}") from None

    def _errors(self) -> tuple[type[BaseException], type[BaseException]]:
        import openai

        return openai.APIStatusError, openai.APIConnectionError

    def _complete(self, system: str, user: str) -> tuple[str, int, int]:
        kwargs: dict[str, Any] = {self.token_param: self.max_tokens}
        if self.temperature is not None:
            kwargs["temperature"] = self.temperature
        resp = self.client.chat.completions.create(
            model=self.model, messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
            **kwargs)
        text = (resp.choices[0].message.content or "") if resp.choices else ""
        usage = resp.usage
        return text, int(getattr(usage, "prompt_tokens", 0) or 0), int(getattr(usage, "completion_tokens", 0) or 0)


class AnthropicGenerator(_LLMGenerator):
    """messages.create of the Anthropic API.

    ``temperature`` defaults to None (left out: current models take none, and the SDK's
    ``create`` no longer has the argument); a value is sent in the request body for the
    models and servers that still read it. Input tokens count cache writes and reads too
    (all are billed as input here).
    """

    provider = "anthropic"
    key_vars = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
    base_url_var = "ANTHROPIC_BASE_URL"

    def __init__(self, model: str, temperature: float | None = None, max_tokens: int = 8192,
                 price_in: float = 0.0, price_out: float = 0.0, **policy: Any) -> None:
        super().__init__(model, temperature, max_tokens, price_in, price_out, **policy)

    def _client(self) -> Any:
        import anthropic

        try:
            return anthropic.Anthropic(max_retries=0, timeout=self.timeout)
        except anthropic.AnthropicError as e:
            raise UserError(f"{self.name}: {e}") from None

    def _errors(self) -> tuple[type[BaseException], type[BaseException]]:
        import anthropic

        return anthropic.APIStatusError, anthropic.APIConnectionError

    def _complete(self, system: str, user: str) -> tuple[str, int, int]:
        kwargs: dict[str, Any] = {}
        if self.temperature is not None:
            kwargs["extra_body"] = {"temperature": self.temperature}
        resp = self.client.messages.create(model=self.model, max_tokens=self.max_tokens, system=system,
                                           messages=[{"role": "user", "content": user}], **kwargs)
        text = "".join(getattr(b, "text", "") for b in resp.content if getattr(b, "type", "") == "text")
        u = resp.usage
        tokens_in = sum(int(getattr(u, k, 0) or 0) for k in
                        ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"))
        return text, tokens_in, int(getattr(u, "output_tokens", 0) or 0)


PROVIDERS: dict[str, type[_LLMGenerator]] = {"openai": OpenAIGenerator, "anthropic": AnthropicGenerator}


def make_generator(spec: str, **kwargs: Any) -> Any:
    """A generator from its name: ``openai:MODEL``, ``anthropic:MODEL`` or ``agent:COMMAND``.

    The model is everything after the first colon (``openai:qwen2.5-coder:32b`` is fine).
    ``kwargs`` go to the generator's constructor (prices, temperature, retry policy, timeout).
    """
    kind, sep, arg = spec.partition(":")
    kind = kind.strip().lower()
    arg = arg.strip()
    if kind == "agent":
        if not arg:
            raise UserError('generator agent:COMMAND needs a command, e.g. agent:"my-agent --flag"')
        from assay.generators.agent import AgentGenerator

        return AgentGenerator(arg, **kwargs)
    if kind not in PROVIDERS:
        raise UserError(f"unknown generator {spec!r}: use openai:MODEL, anthropic:MODEL or agent:COMMAND")
    if not sep or not arg:
        raise UserError(f"generator {spec!r} names no model: use {kind}:MODEL")
    return PROVIDERS[kind](arg, **kwargs)


def _message(e: BaseException) -> str:
    body = getattr(e, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return " ".join(str(err["message"]).split())[:300]
    return " ".join(str(getattr(e, "message", "") or e).split())[:300]


def _retry_after(e: BaseException) -> float | None:
    response = getattr(e, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    value = headers.get("retry-after")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None
