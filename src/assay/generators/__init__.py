"""Generators for ``assay optimize``: they propose candidate kernels for a task.

- ``base``: the interface (Request, Attempt, Proposal, Generator).
- ``llm``: ``openai:MODEL`` / ``anthropic:MODEL`` over the official SDKs; ``make_generator``.
- ``agent``: a coding agent run as a shell command in a prepared workspace.
- ``extract``: the candidate code in a model's reply. ``prompts``: the templates in ``prompts/*.md``.
- ``builtin``: offline templates from the knowledge base, tuned with optuna.
"""

from assay.generators.base import Attempt, Generator, GeneratorError, Proposal, Request

__all__ = ["Attempt", "Generator", "GeneratorError", "Proposal", "Request"]
