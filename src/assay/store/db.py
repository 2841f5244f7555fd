"""The store: every check recorded in SQLite (or any SQLAlchemy URL).

Tables: ``tasks`` and ``candidates`` keyed by content hash (sources kept verbatim),
``checks`` (one verdict each, with its environment). Writes are one transaction per check,
so an interrupted run loses at most the check in flight.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

from sqlalchemy import JSON, Boolean, DateTime, Float, ForeignKey, Integer, String, Text, create_engine, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from assay.errors import UserError
from assay.verdict import Verdict


class Base(DeclarativeBase):
    pass


class TaskRow(Base):
    __tablename__ = "tasks"
    hash: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    kind: Mapped[str] = mapped_column(String(20))
    path: Mapped[str] = mapped_column(Text)
    source: Mapped[str] = mapped_column(Text)


class CandidateRow(Base):
    __tablename__ = "candidates"
    hash: Mapped[str] = mapped_column(String(32), primary_key=True)
    language: Mapped[str] = mapped_column(String(20))
    path: Mapped[str] = mapped_column(Text)
    source: Mapped[str] = mapped_column(Text)


class CheckRow(Base):
    __tablename__ = "checks"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    created: Mapped[dt.datetime] = mapped_column(DateTime)
    task_hash: Mapped[str] = mapped_column(ForeignKey("tasks.hash"))
    candidate_hash: Mapped[str] = mapped_column(ForeignKey("candidates.hash"))
    device: Mapped[str] = mapped_column(String(20))
    accepted: Mapped[bool] = mapped_column(Boolean)
    categories: Mapped[str] = mapped_column(String(200))
    seconds: Mapped[float] = mapped_column(Float)
    schema_version: Mapped[int] = mapped_column(Integer)
    verdict: Mapped[dict[str, Any]] = mapped_column(JSON)
    environment: Mapped[dict[str, Any]] = mapped_column(JSON)


class Store:
    def __init__(self, url: str) -> None:
        if url.startswith("sqlite:///"):
            path = Path(url.removeprefix("sqlite:///"))
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise UserError(f"cannot create the database folder: {e.strerror}", str(path)) from None
        try:
            self.engine = create_engine(url)
            Base.metadata.create_all(self.engine)
        except SQLAlchemyError as e:
            raise UserError(f"cannot open the database: {str(e).splitlines()[0]}", url) from None

    def record(self, verdict: Verdict, task_source: str, candidate_source: str) -> int:
        t, c = verdict.task, verdict.candidate
        with Session(self.engine) as s, s.begin():
            if s.get(TaskRow, t["hash"]) is None:
                s.add(TaskRow(hash=t["hash"], name=t["name"], kind=t["kind"], path=t["path"], source=task_source))
            if s.get(CandidateRow, c["id"]) is None:
                s.add(CandidateRow(hash=c["id"], language=c["language"], path=c["path"], source=candidate_source))
            row = CheckRow(
                created=dt.datetime.now(dt.timezone.utc), task_hash=t["hash"], candidate_hash=c["id"],
                device=verdict.device, accepted=verdict.accepted,
                categories=",".join(sorted({r.category.value for r in verdict.reasons})),
                seconds=verdict.seconds, schema_version=verdict.schema_version,
                verdict=json.loads(verdict.model_dump_json()), environment=verdict.environment,
            )
            s.add(row)
            s.flush()
            return row.id

    def history(self, limit: int = 20) -> list[dict[str, Any]]:
        with Session(self.engine) as s:
            q = (select(CheckRow, TaskRow.name, CandidateRow.path, CandidateRow.language)
                 .join(TaskRow, CheckRow.task_hash == TaskRow.hash)
                 .join(CandidateRow, CheckRow.candidate_hash == CandidateRow.hash)
                 .order_by(CheckRow.id.desc()).limit(limit))
            return [{"id": r.id, "created": r.created.isoformat(timespec="seconds"), "task": name,
                     "candidate": path, "language": lang, "device": r.device, "accepted": r.accepted,
                     "categories": r.categories, "seconds": round(r.seconds, 2)}
                    for r, name, path, lang in s.execute(q)]

    def verdict(self, check_id: int) -> Verdict | None:
        with Session(self.engine) as s:
            row = s.get(CheckRow, check_id)
            return Verdict.model_validate(row.verdict) if row else None
