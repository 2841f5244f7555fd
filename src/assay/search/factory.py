"""Generators from their command-line names: builtin | openai:MODEL | anthropic:MODEL | agent:COMMAND."""

from __future__ import annotations

from typing import Any

from assay.errors import UserError
from assay.task.spec import Task


def make_generators(specs: list[str], task: Task, device: str, seed: int = 0,
                    price_in: float = 0.0, price_out: float = 0.0) -> list[Any]:
    """``price_in``/``price_out``: USD per input/output token, for the money budget."""
    gens: list[Any] = []
    for spec in specs or ["builtin"]:
        kind, _, arg = spec.partition(":")
        if kind == "builtin":
            from assay.generators.builtin import BuiltinGenerator

            gens.append(BuiltinGenerator(task, device=device, seed=seed))
        elif kind in ("openai", "anthropic"):
            if not arg:
                raise UserError(f"--generator {spec!r}: name a model, e.g. {kind}:MODEL")
            from assay.generators.llm import make_generator

            gens.append(make_generator(spec, price_in=price_in, price_out=price_out))
        elif kind == "agent":
            if not arg:
                raise UserError('--generator agent:"COMMAND" needs a command')
            from assay.generators.agent import AgentGenerator

            gens.append(AgentGenerator(arg.strip('"')))  # agent: time-limited, no keys in its environment
        else:
            raise UserError(f"unknown generator {spec!r} (builtin, openai:MODEL, anthropic:MODEL, agent:COMMAND)")
    return gens
