"""Models' roles, retirement and aliases in the store, on SQLite and PostgreSQL: who is in the arena (the
pages, pairing and live battles read that one condition), and the aliases the leak filter looks for."""

from __future__ import annotations

import pytest
from sqlalchemy import insert, select
from sqlalchemy.engine import Engine
from sqlmodel import Session

from tests.factories import MODEL_NAMES, seed_catalog
from votes.catalog.endpoints import EndpointRecord, add_endpoint, list_endpoints
from votes.catalog.roles import (
    ModelChange,
    UnknownModel,
    change_model,
    judge_only_names,
    model_state,
    model_states,
    retire_model,
    retired_names,
)
from votes.names import ModelRole
from votes.review.leak_review import LeakScanner, texts_leak
from votes.tables import liverating_t, model_t, output_t
from votes.voting.views import arena_models, arena_ratings, live_standings, load_pairing_catalog

JUDGE, RETIRED, *PLAYING = MODEL_NAMES


def _ids(engine: Engine) -> dict[str, int]:
    with engine.connect() as conn:
        return {str(n): int(i) for n, i in conn.execute(select(model_t.c.name, model_t.c.id))}


@pytest.fixture
def cast(engine: Engine) -> Engine:
    """The seeded catalog (every model answers every prompt, every model rated) with one judge and one
    retired model."""
    seed_catalog(engine)
    ids = _ids(engine)
    with engine.begin() as conn:
        conn.execute(
            insert(liverating_t),
            [{"model_id": i, "rating": 1000.0, "games": 3} for i in ids.values()],
        )
    with Session(engine) as session:
        change_model(session, JUDGE, ModelChange(role=ModelRole.JUDGE))
        change_model(session, RETIRED, ModelChange(active=False))
        session.commit()
    return engine


def test_only_active_contestants_are_in_the_arena(cast: Engine) -> None:
    ids = _ids(cast)
    playing = {ids[n] for n in PLAYING}
    with Session(cast) as session:
        assert [m.name for m in arena_models(session=session)] == PLAYING
        assert {s.model for s in live_standings(session=session)} == set(PLAYING)
        assert {r.model_id for r in load_pairing_catalog(session=session)} == playing
        assert set(arena_ratings(session=session)) == playing
        states = model_states(session)
    assert (states[JUDGE].role, states[JUDGE].active) == (ModelRole.JUDGE, True)
    assert (states[RETIRED].role, states[RETIRED].active) == (ModelRole.CONTESTANT, False)
    with cast.connect() as conn:
        assert judge_only_names(conn) == (JUDGE,)
        assert retired_names(conn) == {RETIRED}
    # Both: a contestant that may judge, and so in the arena again.
    with Session(cast) as session:
        change_model(session, JUDGE, ModelChange(role="both"), create=False)
        session.commit()
        assert JUDGE in {m.name for m in arena_models(session=session)}
        assert model_state(session, JUDGE).role.judges


def test_a_change_is_validated_before_anything_is_written(cast: Engine) -> None:
    with pytest.raises(ValueError, match="one of contestant, judge, both"):
        ModelChange(role="referee")
    with pytest.raises(ValueError, match="at least 3 characters"):
        ModelChange(add_aliases=("ok-alias", "X"))
    with pytest.raises(ValueError, match="U\\+202E"):
        ModelChange(add_aliases=("evil\u202e",))
    with Session(cast) as session:
        with pytest.raises(UnknownModel):
            change_model(session, "nobody", ModelChange(active=False), create=False)
        with pytest.raises(ValueError, match="must not be empty"):
            change_model(session, "  ", ModelChange(active=False))
        # Aliases are added, one per case-insensitive spelling; clearing starts over.
        change_model(session, PLAYING[0], ModelChange(add_aliases=("Acme Bot", "acme bot", "Zed-1")))
        change_model(session, PLAYING[0], ModelChange(add_aliases=("Zed-1", "Third One")))
        session.commit()
        assert model_state(session, PLAYING[0]).aliases == ("Acme Bot", "Zed-1", "Third One")
        change_model(session, PLAYING[0], ModelChange(clear_aliases=True, add_aliases=("Only",)))
        session.commit()
        assert model_state(session, PLAYING[0]).aliases == ("Only",)


def test_retiring_forgets_the_endpoint_keeps_the_answers_and_adding_brings_it_back(cast: Engine) -> None:
    name = PLAYING[0]
    record = EndpointRecord(name=name, base_url="http://127.0.0.1:9/v1", served_model="m")
    with Session(cast) as session:
        add_endpoint(session=session, record=record)
        assert retire_model(session, name) is True
        assert list_endpoints(session=session) == []
        assert model_state(session, name).active is False
        assert retire_model(session, name) is False  # retired already, no endpoint: nothing else to do
        with pytest.raises(UnknownModel):
            retire_model(session, "nobody")
    with cast.connect() as conn:
        answers = conn.execute(select(output_t.c.id).where(output_t.c.model_id == _ids(cast)[name])).all()
    assert answers  # its answers (and votes) stay
    # Registering its endpoint again brings it back; a judge registered keeps out of the arena.
    with Session(cast) as session:
        add_endpoint(session=session, record=record)
        add_endpoint(
            session=session,
            record=EndpointRecord(name="J", base_url="http://127.0.0.1:9/v1", served_model="j"),
            role=ModelRole.JUDGE,
        )
        assert {m.name for m in arena_models(session=session)} == set(PLAYING)
        # Replacing an endpoint keeps the model's role when none is given.
        add_endpoint(
            session=session,
            record=EndpointRecord(name="J", base_url="http://127.0.0.1:8/v1", served_model="j"),
            replace=True,
        )
        assert model_state(session, "J").role is ModelRole.JUDGE


def test_an_operator_alias_keeps_a_leaking_answer_out_on_the_next_refresh(cast: Engine) -> None:
    name = PLAYING[0]
    model_id = _ids(cast)[name]
    with cast.begin() as conn:
        prompt_id = conn.execute(select(output_t.c.prompt_id).limit(1)).scalar_one()
        inserted = conn.execute(
            insert(output_t).values(
                prompt_id=prompt_id, model_id=model_id, sample=1, text="Hi, I am Zorblax, your helper."
            )
        ).inserted_primary_key
        assert inserted is not None
        leaking = int(inserted[0])
    scanner = LeakScanner()
    with cast.connect() as conn:
        assert leaking not in scanner.leaking_output_ids(conn)
        assert texts_leak(conn, [(model_id, "I am Zorblax.")]) == [False]
    with Session(cast) as session:
        change_model(session, name, ModelChange(add_aliases=("Zorblax",)))
        session.commit()
    with cast.connect() as conn:
        assert scanner.leaking_output_ids(conn) == {leaking}  # scanned again: its model's names changed
        assert texts_leak(conn, [(model_id, "I am Zorblax."), (model_id, "Zorblaxian")]) == [True, False]
    with Session(cast) as session:
        change_model(session, name, ModelChange(clear_aliases=True))
        session.commit()
    with cast.connect() as conn:
        assert scanner.leaking_output_ids(conn) == set()
