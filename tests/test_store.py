import sqlite3

from assay.store.db import Store
from assay.verdict import Category, Reason, StageResult, Status, Verdict


def _verdict(accepted: bool) -> Verdict:
    return Verdict(accepted=accepted, reasons=[] if accepted else [Reason(category=Category.correctness, message="x")],
                   task={"name": "t", "hash": "th", "kind": "native", "path": "t.py"},
                   candidate={"id": "ch", "language": "triton", "path": "c.py"},
                   stages=[StageResult(name="build", status=Status.passed)],
                   environment={"torch": "2.13.0", "python": "3.11"})


def test_record_and_read_back_from_real_sqlite(tmp_path):
    url = f"sqlite:///{tmp_path}/db.sqlite"
    store = Store(url)
    a = store.record(_verdict(True), "task source", "cand source")
    b = store.record(_verdict(False), "task source", "cand source")
    assert (a, b) == (1, 2)
    rows = store.history()
    assert [r["id"] for r in rows] == [2, 1] and rows[0]["categories"] == "correctness"
    assert store.verdict(1).accepted is True
    # it is a real SQLite file with the sources and environment in it
    con = sqlite3.connect(tmp_path / "db.sqlite")
    assert con.execute("select source from candidates").fetchone()[0] == "cand source"
    assert con.execute("select count(*) from checks").fetchone()[0] == 2
    assert "2.13.0" in con.execute("select environment from checks").fetchone()[0]
    # a second Store on the same file sees the same data (durable, not in memory)
    assert len(Store(url).history()) == 2
