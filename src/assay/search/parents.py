"""Parent selection: which measured result a new proposal starts from.

The beam is the top ``beam`` generated entries that were accepted *and timed* (a score from
the timing stage), fastest first; library baselines are not parents (their source is the
reference, which every request already carries). A parent is drawn from the beam by a
tournament: ``pressure`` beam positions are drawn uniformly (with replacement) and the
best-ranked one wins, so the fastest entry is the most likely parent but every beam member
keeps a chance: the entry at rank r of n is picked with probability ((n-r+1)/n)^p - ((n-r)/n)^p
(pressure 1 is uniform over the beam; a large pressure nearly always takes the fastest).

With ``islands``, each generator (by its name) has its own sub-population: a proposal's parent
comes from the beam of its own island, except with probability ``migration`` (or when its
island has no measured entry yet) from the beam of the whole run.

All draws come from one ``random.Random(seed)``: the same run history and seed give the same
parents.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    from assay.search.loop import Entry


@dataclass(frozen=True)
class ParentPolicy:
    beam: int = 4  # the top-k accepted, timed, generated entries by score
    pressure: int = 2  # tournament size: 1 = uniform over the beam, larger = greedier
    islands: bool = False  # per-generator sub-populations
    migration: float = 0.1  # with islands: chance of drawing from the whole run's beam instead
    seed: int = 0

    def __post_init__(self) -> None:
        if self.beam < 0 or self.pressure < 1 or not 0.0 <= self.migration <= 1.0:
            raise ValueError(f"invalid parent policy {self}")


class ParentSelector:
    def __init__(self, policy: ParentPolicy | None = None) -> None:
        self.policy = policy or ParentPolicy()
        self.rng = random.Random(self.policy.seed)

    def beam(self, entries: Sequence["Entry"], island: str | None = None) -> list["Entry"]:
        """The measured parents, fastest first (ties: the earlier entry)."""
        pool = [e for e in entries if e.verdict.accepted and e.score is not None
                and not e.generator.startswith("library:") and (island is None or e.island == island)]
        return sorted(pool, key=lambda e: (-(e.score or 0.0), e.seq))[: self.policy.beam]

    def choose(self, entries: Sequence["Entry"], island: str | None = None) -> "Entry | None":
        """The parent of the next new proposal (of generator ``island``), or None while nothing is measured."""
        beam: list[Entry] = []
        if self.policy.islands and island is not None and self.rng.random() >= self.policy.migration:
            beam = self.beam(entries, island)
        if not beam:
            beam = self.beam(entries)
        if not beam:
            return None
        return beam[min(self.rng.randrange(len(beam)) for _ in range(self.policy.pressure))]
