"""Gold accuracy in the one annotator review: a guesser is listed with the gold reason and flagged on
--apply, an honest annotator is not; a gold that good annotators keep missing is retired, the others stay."""

from __future__ import annotations

import logging
import random

import pytest
from sqlalchemy import insert, select
from sqlalchemy.engine import Engine
from sqlmodel import Session

from arena.voting.pairing_service import PairingService
from tests.factories import make_settings, seed_catalog
from votes.models import Annotator, Model
from votes.review.gold_review import RetireRule, retire_missed_golds
from votes.review.voters import review_annotators
from votes.tables import annotator_t, battle_t, goldbattle_t, goldvote_t
from votes.voting.gold_items import GoldSpec, add_golds


def _setup(engine: Engine, n_golds: int, n_annotators: int) -> tuple[list[int], list[int], int]:
    """Golds (identical kind: the right vote is a tie), annotators, and a model id for the battle rows."""
    with Session(engine) as session:
        model = Model(name="m-gold")
        session.add(model)
        annotators = [Annotator(kind="invited", label=f"a{i}") for i in range(n_annotators)]
        session.add_all(annotators)
        specs = [GoldSpec("identical", None, f"P{i}", f"T{i}", f"T{i}", "tie") for i in range(n_golds)]
        add_golds(session, specs, source="file")
        session.commit()
        stmt = select(goldbattle_t.c.id).order_by(goldbattle_t.c.id)
        golds = [int(g) for g in session.connection().scalars(stmt)]
        return golds, [int(a.id or 0) for a in annotators], int(model.id or 0)


def _vote(engine: Engine, annotator: int, gold: int, model: int, right: bool) -> None:
    with engine.begin() as conn:
        battle_id = conn.execute(
            insert(battle_t).returning(battle_t.c.id),
            {"model_a_id": model, "model_b_id": model, "annotator_id": annotator, "source": "gold"},
        ).scalar_one()
        conn.execute(
            insert(goldvote_t),
            {
                "battle_id": battle_id,
                "gold_id": gold,
                "annotator_id": annotator,
                "winner": "tie" if right else "model_a",
                "expected": "tie",
                "correct": right,
                "quiz": False,
            },
        )


def test_a_guesser_is_one_entry_with_the_gold_reason_and_flagged_on_apply(engine: Engine) -> None:
    golds, (honest, guesser), model = _setup(engine, 40, 2)
    rng = random.Random(1)
    for gold in golds:
        _vote(engine, honest, gold, model, right=rng.random() < 0.95)
        _vote(engine, guesser, gold, model, right=rng.random() < 0.3)
    rows = {r.annotator_id: r for r in review_annotators(engine)}
    assert set(rows) == {honest, guesser}  # gold-only annotators are in the one list
    assert rows[guesser].suspicious and rows[guesser].reason is not None
    assert str(rows[guesser].reason).startswith("gold accuracy") and rows[guesser].n_gold == 40
    assert rows[guesser].gold_low <= rows[guesser].gold_accuracy <= rows[guesser].gold_high < 0.6
    assert not rows[honest].suspicious and rows[honest].gold_low > 0.7
    assert not rows[guesser].flagged  # listing flags nobody
    # the gold record's posterior of honesty weighs the guesser out and the honest annotator in
    assert rows[guesser].honest_weight < 1e-3 < 0.9 < rows[honest].honest_weight
    review_annotators(engine, apply=True)
    with engine.connect() as conn:
        stmt = select(annotator_t.c.id, annotator_t.c.flag_reason).where(annotator_t.c.flagged.is_(True))
        flagged = {int(a): str(r) for a, r in conn.execute(stmt).all()}
    assert list(flagged) == [guesser] and flagged[guesser].startswith("auto: gold accuracy")


def test_a_gold_good_annotators_keep_missing_is_retired(engine: Engine) -> None:
    golds, annotators, model = _setup(engine, 10, 5)
    bad_gold = golds[3]
    for annotator in annotators:
        for gold in golds:
            _vote(engine, annotator, gold, model, right=gold != bad_gold)
    with engine.begin() as conn:
        retired = retire_missed_golds(conn, RetireRule(min_golds=5, good_low=0.5, min_votes=3))
    assert retired == [(bad_gold, "missed by 5 of 5 good annotators")]
    with engine.connect() as conn:
        state = {
            int(g): bool(r) for g, r in conn.execute(select(goldbattle_t.c.id, goldbattle_t.c.retired)).all()
        }
    assert [g for g, r in state.items() if r] == [bad_gold]
    with engine.begin() as conn:  # nothing more to retire
        assert retire_missed_golds(conn, RetireRule(min_golds=5, good_low=0.5, min_votes=3)) == []


def test_the_live_sites_catalog_refresh_retires_missed_golds_without_apply(
    engine: Engine, db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    golds, annotators, model = _setup(engine, 20, 4)
    bad_gold = golds[5]
    for annotator in annotators:
        for gold in golds:
            _vote(engine, annotator, gold, model, right=gold != bad_gold)
    seed_catalog(engine)  # models with answers, for the reveal to name
    service = PairingService(engine, make_settings(db_url, gold_rate=0.2), rng=random.Random(3))
    with caplog.at_level(logging.WARNING, logger="votes.review.gold_review"):
        service.refresh(force=True)  # what a worker's periodic refresh runs (every few minutes)
    assert f"retired gold {bad_gold}: missed by 4 of 4 good annotators" in caplog.text
    with engine.connect() as conn:
        retired = goldbattle_t.c.retired.is_(True)
        stmt = select(goldbattle_t.c.id, goldbattle_t.c.retired_reason).where(retired)
        assert conn.execute(stmt).all() == [(bad_gold, "missed by 4 of 4 good annotators")]
    service.prepare(999)
    served = {g.gold_id for _ in range(400) if (g := service.pick_gold(999)) is not None}
    assert served == set(golds) - {bad_gold}  # served at once without it, no restart
