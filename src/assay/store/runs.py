"""Optimization runs in the store: one row per run, one per evaluated candidate.

Each candidate's row is committed as soon as its verdict exists, so a run killed with
``kill -9`` loses at most the candidates in flight; ``assay optimize --resume RUN`` reads
the rows back and continues.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from sqlalchemy import JSON, Boolean, DateTime, Float, ForeignKey, Integer, String, Text, select
from sqlalchemy.orm import Mapped, Session, mapped_column

from assay.store.db import Base, Store
from assay.verdict import Verdict


class RunRow(Base):
    __tablename__ = "runs"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    created: Mapped[dt.datetime] = mapped_column(DateTime)
    task_path: Mapped[str] = mapped_column(Text)
    task_hash: Mapped[str] = mapped_column(String(32))
    status: Mapped[str] = mapped_column(String(20))  # running | done
    config: Mapped[dict[str, Any]] = mapped_column(JSON)
    summary: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


class RunCandidateRow(Base):
    __tablename__ = "run_candidates"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id"))
    seq: Mapped[int] = mapped_column(Integer)
    source: Mapped[str] = mapped_column(Text)
    source_hash: Mapped[str] = mapped_column(String(32))
    generator: Mapped[str] = mapped_column(String(200))
    parent: Mapped[int | None] = mapped_column(Integer, nullable=True)
    mode: Mapped[str] = mapped_column(String(20))
    accepted: Mapped[bool] = mapped_column(Boolean)
    score: Mapped[float | None] = mapped_column(Float, nullable=True)
    provenance: Mapped[dict[str, Any]] = mapped_column(JSON)
    verdict: Mapped[dict[str, Any]] = mapped_column(JSON)


class RunStore:
    def __init__(self, store: Store) -> None:
        self.engine = store.engine
        Base.metadata.create_all(self.engine)

    def new_run(self, task_path: str, task_hash: str, config: dict[str, Any]) -> int:
        with Session(self.engine) as s, s.begin():
            row = RunRow(created=dt.datetime.now(dt.timezone.utc), task_path=task_path, task_hash=task_hash,
                         status="running", config=config, summary={})
            s.add(row)
            s.flush()
            return row.id

    def run(self, run_id: int) -> RunRow | None:
        with Session(self.engine) as s:
            row = s.get(RunRow, run_id)
            if row is not None:
                s.expunge(row)
            return row

    def add_candidate(self, run_id: int, seq: int, source: str, source_hash: str, generator: str,
                      parent: int | None, mode: str, verdict: Verdict, score: float | None,
                      provenance: dict[str, Any]) -> int:
        with Session(self.engine) as s, s.begin():
            row = RunCandidateRow(run_id=run_id, seq=seq, source=source, source_hash=source_hash,
                                  generator=generator, parent=parent, mode=mode, accepted=verdict.accepted,
                                  score=score, provenance=provenance,
                                  verdict=json.loads(verdict.model_dump_json()))
            s.add(row)
            s.flush()
            return row.id

    def candidates(self, run_id: int) -> list[RunCandidateRow]:
        with Session(self.engine) as s:
            rows = list(s.scalars(select(RunCandidateRow).where(RunCandidateRow.run_id == run_id)
                                  .order_by(RunCandidateRow.seq)))
            for r in rows:
                s.expunge(r)
            return rows

    def finish(self, run_id: int, summary: dict[str, Any]) -> None:
        with Session(self.engine) as s, s.begin():
            row = s.get(RunRow, run_id)
            if row is not None:
                row.status = "done"
                row.summary = summary
