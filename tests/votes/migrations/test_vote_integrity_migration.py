"""The one-judgement migration upgrades a store that already holds repeated judgements: every row kept,
the key on the first judgement of each (annotator, prompt, pair) only, and a new repeat refused after."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from votes.db import make_engine
from votes.migrate import head_revision, upgrade_database

NOW = datetime(2026, 11, 1, tzinfo=UTC)


def test_upgrade_keeps_repeated_judgements_and_keys_the_first(db_url: str) -> None:
    upgrade_database(db_url, revision="0006_judgments")
    engine = make_engine(db_url)
    try:
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO model (id, name, active, created_at)"
                    " VALUES (1, 'a', true, :t), (2, 'b', true, :t)"
                ),
                {"t": NOW},
            )
            conn.execute(text("INSERT INTO prompt (id, text, created_at) VALUES (1, 'q', :t)"), {"t": NOW})
            conn.execute(
                text(
                    "INSERT INTO annotator (id, kind, created_at, flagged) VALUES (1, 'anonymous', :t, false)"
                ),
                {"t": NOW},
            )
            # The same prompt and pair judged three times by one annotator (sides swapped once), and once
            # through an import (no token: never keyed).
            for battle_id, (a, b, token) in enumerate(
                [(1, 2, "t1"), (2, 1, "t2"), (1, 2, "t3"), (1, 2, None)], 1
            ):
                conn.execute(
                    text(
                        "INSERT INTO battle (id, prompt_id, model_a_id, model_b_id, annotator_id,"
                        " issued_at, source, token_id) VALUES (:id, 1, :a, :b, 1, :t, :s, :token)"
                    ),
                    {
                        "id": battle_id,
                        "a": a,
                        "b": b,
                        "t": NOW,
                        "s": "site" if token else "import",
                        "token": token,
                    },
                )
                conn.execute(
                    text(
                        "INSERT INTO vote (id, battle_id, model_a_id, model_b_id, annotator_id, winner,"
                        " created_at) VALUES (:id, :id, :a, :b, 1, 'model_a', :t)"
                    ),
                    {"id": battle_id, "a": a, "b": b, "t": NOW},
                )
        assert upgrade_database(db_url) == head_revision()
        with engine.connect() as conn:
            keys = conn.execute(text("SELECT id, judgement_key FROM battle ORDER BY id")).all()
            n_votes = conn.execute(text("SELECT COUNT(*) FROM vote")).scalar_one()
        assert [tuple(k) for k in keys] == [(1, "1:1:1:2"), (2, None), (3, None), (4, None)]
        assert n_votes == 4
        with pytest.raises(IntegrityError), engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO battle (prompt_id, model_a_id, model_b_id, annotator_id, issued_at, source,"
                    " token_id, judgement_key) VALUES (1, 2, 1, 1, :t, 'site', 't5', '1:1:1:2')"
                ),
                {"t": NOW},
            )
    finally:
        engine.dispose()
