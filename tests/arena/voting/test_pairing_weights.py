"""The fairness ledger's history: the pairing weights in force are recorded when they move or an interval
passes, read back per day, and recorded by the live site's pairing service under the optimal policy."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, select
from sqlalchemy.engine import Engine

from arena.voting.pairing_service import PairingService
from tests.factories import make_settings
from votes.tables import model_t, pairingweight_t
from votes.voting.pairing_weights import model_shares, pairing_weight_history, record_pairing_weights

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def _rows(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(pairingweight_t)).scalar_one())


def test_model_shares_count_a_battle_half_for_each_side() -> None:
    shares = model_shares({(1, 2): 0.5, (1, 3): 0.3, (2, 3): 0.2, (3, 4): 0.0})
    assert shares == pytest.approx({1: 0.4, 2: 0.35, 3: 0.25})
    assert model_shares({}) == {} and model_shares({(1, 2): 0.0}) == {}


def test_weights_are_recorded_when_they_move_or_an_interval_passes(seeded: Engine) -> None:
    with seeded.connect() as conn:
        ids = {str(n): int(i) for i, n in conn.execute(select(model_t.c.id, model_t.c.name))}
    a, b, c = sorted(ids.values())[:3]
    first = {a: 0.5, b: 0.3, c: 0.2}
    assert record_pairing_weights(seeded, first, policy="optimal", now=T0)
    # Same shares, or a move of a tenth of a point, ten minutes later: nothing written.
    assert not record_pairing_weights(seeded, first, policy="optimal", now=T0 + timedelta(minutes=10))
    nudged = {a: 0.499, b: 0.301, c: 0.2}
    assert not record_pairing_weights(seeded, nudged, policy="optimal", now=T0 + timedelta(minutes=20))
    assert _rows(seeded) == 3
    # A model gaining two points is recorded at once; an unchanged set is recorded again after an hour.
    moved = {a: 0.48, b: 0.32, c: 0.2}
    assert record_pairing_weights(seeded, moved, policy="optimal", now=T0 + timedelta(minutes=30))
    assert record_pairing_weights(seeded, moved, policy="optimal", now=T0 + timedelta(minutes=95))
    # A model leaving the design is a change (its share falls to zero).
    assert record_pairing_weights(seeded, {a: 0.6, b: 0.4}, policy="optimal", now=T0 + timedelta(minutes=96))
    assert not record_pairing_weights(seeded, {}, policy="optimal", now=T0 + timedelta(days=3))
    assert _rows(seeded) == 3 + 3 + 3 + 2


def test_history_keeps_the_last_record_of_each_day(seeded: Engine) -> None:
    with seeded.connect() as conn:
        names = {int(i): str(n) for i, n in conn.execute(select(model_t.c.id, model_t.c.name))}
    a, b, c = sorted(names)[:3]
    record_pairing_weights(seeded, {a: 0.5, b: 0.5}, policy="optimal", now=T0)
    record_pairing_weights(seeded, {a: 0.2, b: 0.3, c: 0.5}, policy="optimal", now=T0 + timedelta(hours=5))
    record_pairing_weights(seeded, {a: 0.7, c: 0.3}, policy="optimal", now=T0 + timedelta(days=1))
    history = pairing_weight_history(seeded)
    assert list(history) == ["2026-03-02", "2026-03-03"]
    assert history["2026-03-02"] == {names[a]: 0.2, names[b]: 0.3, names[c]: 0.5}
    assert history["2026-03-03"] == {names[a]: 0.7, names[c]: 0.3}


def test_the_pairing_service_records_the_optimal_policys_weights(seeded: Engine, db_url: str) -> None:
    settings = make_settings(db_url)
    assert settings.pairing_policy == "optimal"
    service = PairingService(seeded, settings, rng=random.Random(1))
    service.refresh(force=True)
    history = pairing_weight_history(seeded)
    assert len(history) == 1
    (shares,) = history.values()
    with seeded.connect() as conn:
        models = {str(n) for (n,) in conn.execute(select(model_t.c.name))}
    assert set(shares) == models and sum(shares.values()) == pytest.approx(1.0, abs=1e-5)
    n = _rows(seeded)
    service.refresh(force=True)  # the same design again: this worker writes nothing
    assert _rows(seeded) == n


def test_other_policies_record_nothing(seeded: Engine, db_url: str) -> None:
    service = PairingService(seeded, make_settings(db_url, pairing_policy="uniform"), rng=random.Random(1))
    service.refresh(force=True)
    assert _rows(seeded) == 0
