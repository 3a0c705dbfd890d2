"""A composite board from the database counts and hashes exactly the votes it fits: every annotator's
votes with a prompt, judges included, not the default filter's (which leaves the judges out)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import update
from sqlalchemy.engine import Engine

from arena.publish.board_reads import load_votes_with_texts
from tests.factories import write_jsonl
from votes.imports.files import import_file
from votes.reads.annotated import source_aware_filter
from votes.reads.cells import load_pair_counts
from votes.reads.filters import JUDGE_KIND, VoteFilter
from votes.reads.ledger import ledger_sha256
from votes.tables import annotator_t


def _rows() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for i in range(4):
        for a, b in (("x", "y"), ("y", "z"), ("x", "z")):
            rows.append(
                {"question_id": f"p{i}", "model_a": a, "model_b": b, "winner": "model_a", "judge": "ann"}
            )
            rows.append(
                {"question_id": f"p{i}", "model_a": b, "model_b": a, "winner": "model_b", "judge": "jj"}
            )
    # votes the composite cannot use: no prompt, or no annotator
    rows.append({"model_a": "x", "model_b": "z", "winner": "model_b", "judge": "ann"})
    rows.append({"question_id": "p0", "model_a": "y", "model_b": "z", "winner": "model_b"})
    return rows


def test_composite_counts_and_hash_cover_the_fitted_votes(engine: Engine, tmp_path: Path) -> None:
    catalog = [
        {"prompt_id": f"p{i}", "prompt": f"Q{i}", "model": m, "output": f"{m} says {i}"}
        for i in range(4)
        for m in ("x", "y", "z")
    ]
    import_file(engine, write_jsonl(tmp_path / "catalog.jsonl", catalog))
    import_file(engine, write_jsonl(tmp_path / "battles.jsonl", _rows()))
    with engine.begin() as conn:  # "jj" is an LLM judge: the default filter leaves its votes out
        conn.execute(update(annotator_t).where(annotator_t.c.label == "jj").values(kind=JUDGE_KIND))
    stored = load_votes_with_texts(engine, VoteFilter(), by_source=True)
    plain = load_votes_with_texts(engine, VoteFilter())
    assert stored.by_source is not None
    fitted = len(stored.by_source.battles)
    assert fitted == 24  # both annotators' votes with a prompt, nothing else
    assert stored.counts.n_votes == fitted
    assert plain.counts.n_votes == 14  # the human's 12 with a prompt, one without, one without annotator
    with engine.connect() as conn:
        assert stored.digest == ledger_sha256(conn, source_aware_filter(VoteFilter()))
        assert load_pair_counts(conn, filters=source_aware_filter(VoteFilter())).n_votes == fitted
    assert stored.digest != plain.digest
