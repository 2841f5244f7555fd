"""The offline generator: knowledge-base Triton templates matched to the task, tuned with optuna.

For each template whose operation signature matches the reference's traced aten ops, the
first proposal uses the template's default parameters; later ones come from an optuna TPE
study over its parameter space (block sizes, warps, stages), told the measured time of each
verdict (a rejected or untimed candidate counts as a failed trial).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from assay.task.spec import Task
from assay.verdict import Verdict


@dataclass
class OfflineProposal:
    source: str | None
    generator: str
    model: str
    params: dict[str, Any] = field(default_factory=dict)
    prompt_hash: str = ""
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    raw: str = ""
    trial: Any = None
    template: Any = None


class BuiltinGenerator:
    name = "builtin"

    def __init__(self, task: Task, device: str = "cpu", seed: int = 0, trials_per_template: int = 8) -> None:
        self.task, self.device, self.seed = task, device, seed
        self.trials_per_template = trials_per_template
        self._templates: list[Any] | None = None
        self._studies: dict[str, Any] = {}
        self._asked: dict[str, int] = {}

    def templates(self) -> list[Any]:
        if self._templates is None:
            from assay.knowledge.base import match

            self._templates = list(match(self.task))
        return self._templates

    def propose(self, req: Any) -> OfflineProposal:
        for tmpl in self.templates():
            n = self._asked.get(tmpl.name, 0)
            if n >= min(self.trials_per_template, _space_size(tmpl.params)):
                continue
            self._asked[tmpl.name] = n + 1
            if n == 0:  # the template's defaults first
                params = {k: v[0] for k, v in tmpl.params.items()}
                trial = None
            else:
                study = self._study(tmpl)
                trial = study.ask()
                params = {k: trial.suggest_categorical(k, list(v)) for k, v in tmpl.params.items()}
            src = tmpl.render(self.task.entry_name, params)
            return OfflineProposal(src, f"builtin:{tmpl.name}", f"template:{tmpl.name}", params,
                                   prompt_hash=hashlib.sha256(repr((tmpl.name, params)).encode()).hexdigest()[:12],
                                   trial=trial, template=tmpl)
        return OfflineProposal(None, "builtin", "template:none")

    def feedback(self, proposal: OfflineProposal, verdict: Verdict) -> None:
        tmpl = proposal.template
        if tmpl is None:
            return
        study = self._study(tmpl)
        value = _objective(verdict)
        import optuna

        if proposal.trial is None:  # defaults: enqueue as a known point
            dist = {k: optuna.distributions.CategoricalDistribution(list(v)) for k, v in tmpl.params.items()}
            if value is not None:
                study.add_trial(optuna.trial.create_trial(params=proposal.params, distributions=dist, value=value))
            return
        if value is None:
            study.tell(proposal.trial, state=optuna.trial.TrialState.FAIL)
        else:
            study.tell(proposal.trial, value)

    def _study(self, tmpl: Any) -> Any:
        if tmpl.name not in self._studies:
            import optuna

            optuna.logging.set_verbosity(optuna.logging.WARNING)
            self._studies[tmpl.name] = optuna.create_study(
                direction="minimize", sampler=optuna.samplers.TPESampler(seed=self.seed))
        return self._studies[tmpl.name]


def _space_size(params: dict[str, list[Any]]) -> int:
    n = 1
    for v in params.values():
        n *= max(1, len(v))
    return n


def _objective(v: Verdict) -> float | None:
    """Weighted mean of the candidate's median time over workload shapes (lower is better)."""
    if not v.accepted:
        return None
    t = v.stage("timing")
    if t is None or not t.evidence.get("shapes"):
        return None
    shapes = t.evidence["shapes"]
    total_w = sum(s["weight"] for s in shapes) or 1.0
    return sum(s["candidate"]["median"] * s["weight"] for s in shapes) / total_w
