"""Knowledge-base write-back: verified winners and caught cheats, kept in the store and retrieved
for later tasks with the same operation signature on the same hardware.

Key: the reference's aten compute ops (sorted, joined), the hardware (GPU name or CPU), the
dtype, and the shape regime (log2 of the largest workload's input elements, bucketed by 4).
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

from sqlalchemy import JSON, DateTime, Integer, String, Text, select
from sqlalchemy.orm import Mapped, Session, mapped_column

from assay.store.db import Base, Store
from assay.task.spec import Task


class KnowledgeRow(Base):
    __tablename__ = "knowledge"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    created: Mapped[dt.datetime] = mapped_column(DateTime)
    kind: Mapped[str] = mapped_column(String(20))  # winner | cheat
    op_signature: Mapped[str] = mapped_column(String(500))
    hardware: Mapped[str] = mapped_column(String(200))
    dtype: Mapped[str] = mapped_column(String(20))
    regime: Mapped[str] = mapped_column(String(40))
    source: Mapped[str] = mapped_column(Text)
    summary: Mapped[str] = mapped_column(Text)
    provenance: Mapped[dict[str, Any]] = mapped_column(JSON)


def op_signature(task: Task, device: str = "cpu") -> str:
    """The reference's aten compute ops at a small shape, as a stable string."""
    from assay.verify.cases import Case, shrink_to
    from assay.verify.inputs import make_inputs
    from assay.verify.integrity import reference_ops

    dims = shrink_to(task, dict(task.workloads[0].dims), 1 << 12)
    case = Case("signature", dims, task.dtypes[0], "normal", tuple("contiguous" for _ in task.inputs), seed=1)
    try:
        return ",".join(sorted(reference_ops(task, case, make_inputs(task, case), device)))
    except Exception:  # noqa: BLE001 - a reference that cannot run small: no signature
        return ""


def regime(task: Task) -> str:
    biggest = max(sum(math.prod(s) for s in task.input_shapes(w.dims)) for w in task.workloads)
    return f"2^{4 * (int(math.log2(max(biggest, 1))) // 4)}"


class Memory:
    def __init__(self, store: Store) -> None:
        self.engine = store.engine
        Base.metadata.create_all(self.engine)

    def add(self, kind: str, task: Task, hardware: str, source: str, summary: str,
            provenance: dict[str, Any], signature: str | None = None) -> int:
        with Session(self.engine) as s, s.begin():
            row = KnowledgeRow(created=dt.datetime.now(dt.timezone.utc), kind=kind,
                               op_signature=signature if signature is not None else op_signature(task),
                               hardware=hardware, dtype=task.dtypes[0], regime=regime(task), source=source,
                               summary=summary, provenance=provenance)
            s.add(row)
            s.flush()
            return row.id

    def retrieve(self, signature: str, hardware: str, kind: str = "winner", limit: int = 3) -> list[KnowledgeRow]:
        """Entries of this kind for the same op signature, the same hardware first."""
        with Session(self.engine) as s:
            rows = list(s.scalars(select(KnowledgeRow).where(KnowledgeRow.kind == kind,
                                                             KnowledgeRow.op_signature == signature)
                                  .order_by(KnowledgeRow.id.desc())))
            for r in rows:
                s.expunge(r)
        rows.sort(key=lambda r: r.hardware != hardware)
        return rows[:limit]
