"""The annotator review reports skip asymmetry: a voter whose votes all show one model gets that model in
the ``on screen`` fields and a reason naming it; honest voters drawn from the same pairs do not. Applied,
the review stores every reviewed annotator's honest weight (what ``--robust`` fits weigh votes by)."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
from sqlalchemy import insert, select, update
from sqlalchemy.engine import Engine

from votes.review.voters import review_annotators
from votes.tables import annotator_t, battle_t, model_t, vote_t

NOW = datetime(2026, 11, 1, tzinfo=UTC)
N_MODELS = 5


def _seed(engine: Engine) -> None:
    """21 voters of 40 random votes each; the last only votes when m2 is on screen."""
    rng = np.random.default_rng(7)
    with engine.begin() as conn:
        models = [
            conn.execute(insert(model_t).values(name=f"m{i}").returning(model_t.c.id)).scalar_one()
            for i in range(N_MODELS)
        ]
        battles: list[dict[str, object]] = []
        votes: list[dict[str, object]] = []
        for g in range(21):
            annotator = conn.execute(
                insert(annotator_t).values(label=f"a{g}", kind="anonymous").returning(annotator_t.c.id)
            ).scalar_one()
            n = 0
            while n < 40:
                a = int(rng.integers(N_MODELS))
                b = int((a + rng.integers(1, N_MODELS)) % N_MODELS)
                if g == 20 and 2 not in (a, b):
                    continue  # the last voter skips every battle without m2
                battles.append(
                    {
                        "id": len(battles) + 1,
                        "model_a_id": models[a],
                        "model_b_id": models[b],
                        "annotator_id": annotator,
                        "issued_at": NOW,
                        "source": "site",
                    }
                )
                votes.append(
                    {
                        "battle_id": len(battles),
                        "model_a_id": models[a],
                        "model_b_id": models[b],
                        "annotator_id": annotator,
                        "winner": "model_a" if rng.random() < 0.5 else "model_b",
                        "seconds_to_vote": 10.0,
                        "created_at": NOW,
                    }
                )
                n += 1
        conn.execute(insert(battle_t), battles)
        conn.execute(insert(vote_t), votes)


def test_review_names_the_model_a_selective_voter_waits_for(engine: Engine) -> None:
    _seed(engine)
    rows = {r.label: r for r in review_annotators(engine)}
    skipper = rows["a20"]
    assert skipper.on_screen == "m2" and skipper.on_screen_share == 1.0
    assert skipper.on_screen_q < 0.01 and skipper.suspicious
    assert skipper.reason is not None and "votes mostly when m2 is on screen" in skipper.reason
    honest = [r for label, r in rows.items() if label != "a20"]
    assert all(r.on_screen_q >= 0.01 for r in honest)
    assert not any(r.reason and "on screen" in r.reason for r in honest)


def test_applied_review_stores_every_reviewed_annotators_honest_weight(engine: Engine) -> None:
    _seed(engine)
    with engine.begin() as conn:  # a stale weight, so a review that wrote nothing shows
        conn.execute(update(annotator_t).values(honest_weight=0.125))
    rows = review_annotators(engine, apply=True)
    assert len(rows) == 21
    with engine.connect() as conn:
        stored = dict(conn.execute(select(annotator_t.c.id, annotator_t.c.honest_weight)).all())
    for row in rows:
        assert stored[row.annotator_id] == row.honest_weight != 0.125, row.label
        assert 0.0 <= row.honest_weight <= 1.0
