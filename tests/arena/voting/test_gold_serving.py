"""Gold battles on the site: served at the set rate, never twice to one annotator, in the same shape as any
battle; their votes are stored apart and move no rating, live or fitted; the onboarding quiz flags an
annotator who fails it."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import delete, func, select, update
from sqlalchemy.engine import Engine
from sqlmodel import Session

from arena.publish.board_reads import load_from_database
from arena.voting.pairing_service import PairingService
from leaderboard.bt.compute import compute_leaderboard
from leaderboard.bt.request import FitRequest
from tests.arena.conftest import AppFactory
from tests.factories import ADMIN_TOKEN, live_ratings, make_settings, write_jsonl
from votes.reads.filters import VoteFilter
from votes.tables import annotator_t, battle_t, goldbattle_t, goldvote_t, vote_t
from votes.voting.gold_items import add_gold_file, derive_golds


def _add_golds(engine: Engine, tmp_path: Path, n: int, *, identical: bool = False) -> None:
    rows = [
        {
            "kind": "identical",
            "prompt": f"Gold prompt {i}?",
            "text": f"Gold answer {i}.",
            "category": "generic",
        }
        if identical
        else {
            "kind": "objective",
            "prompt": f"Gold prompt {i}?",
            "right": f"Right {i}.",
            "wrong": f"Wrong {i}.",
            "category": "generic",
        }
        for i in range(n)
    ]
    with Session(engine) as session:
        assert add_gold_file(session, write_jsonl(tmp_path / f"golds-{n}.jsonl", rows)) == n
        session.commit()


@pytest.mark.parametrize("rate", [0.05, 0.2])
def test_served_gold_share_is_within_one_point_of_the_rate_over_10000_battles(
    seeded: Engine, db_url: str, tmp_path: Path, rate: float
) -> None:
    _add_golds(seeded, tmp_path, 400)
    service = PairingService(seeded, make_settings(db_url, gold_rate=rate), rng=random.Random(11))
    served: dict[int, list[int]] = {}
    n_gold = 0
    for annotator in range(1, 101):  # 100 annotators x 100 battles
        service.prepare(annotator)
        mine = served.setdefault(annotator, [])
        for _ in range(100):
            gold = service.pick_gold(annotator)
            if gold is not None:
                n_gold += 1
                mine.append(gold.gold_id)
    assert abs(n_gold / 10_000 - rate) <= 0.01, n_gold
    assert all(len(ids) == len(set(ids)) for ids in served.values())  # never the same gold twice


def _next(client: TestClient) -> dict[str, Any]:
    response = client.get("/api/battles/next")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _vote(client: TestClient, battle: dict[str, Any], winner: str) -> dict[str, Any]:
    response = client.post(
        "/api/votes",
        json={"token": battle["token"], "winner": winner},
        headers={"X-CSRF-Token": battle["csrf_token"]},
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _shape(value: Any) -> Any:
    """The structure of a JSON value: keys and types, not contents."""
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shape(v) for v in value[:1]]
    return type(value).__name__


def _count(engine: Engine, table: Any) -> int:
    with engine.connect() as conn:
        return int(conn.scalar(select(func.count()).select_from(table)) or 0)


def test_gold_battles_look_like_live_ones_and_their_votes_count_nowhere(
    seeded: Engine, make_client: AppFactory, tmp_path: Path
) -> None:
    _add_golds(seeded, tmp_path, 3)
    client = make_client(gold_rate=0.0, gold_quiz=5)  # the quiz: the first battles are golds
    before = live_ratings(seeded)
    golds = [_next(client) for _ in range(3)]
    live = _next(client)  # all three golds served: never one twice, so a live battle comes next
    gold_prompts = {g["prompt"]["text"] for g in golds}
    assert gold_prompts == {"Gold prompt 0?", "Gold prompt 1?", "Gold prompt 2?"}
    assert live["prompt"]["text"] not in gold_prompts
    assert all(_shape(g) == _shape(live) for g in golds)
    assert all(abs(len(g["token"]) - len(live["token"])) <= 64 for g in golds)
    results = [_vote(client, g, "model_a") for g in golds]
    assert _count(seeded, vote_t) == 0 and _count(seeded, goldvote_t) == 3
    assert live_ratings(seeded) == before  # no live rating moved
    live_result = _vote(client, live, "model_a")
    assert all(_shape(r) == _shape(live_result) for r in results)
    for r in results:  # the reveal names catalog models and shows the page of any battle
        assert r["model_a"] != "gold" and r["model_b"] != "gold"
        page = client.get(f"/battles/{r['battle_id']}")
        assert page.status_code == 200 and "Gold prompt" in page.text
    # a retry answers the first result; another winner on the same token is refused
    again = client.post(
        "/api/votes",
        json={"token": golds[0]["token"], "winner": "model_a"},
        headers={"X-CSRF-Token": golds[0]["csrf_token"]},
    )
    assert again.status_code == 200 and again.json()["replayed"] is True
    other = client.post(
        "/api/votes",
        json={"token": golds[0]["token"], "winner": "model_b"},
        headers={"X-CSRF-Token": golds[0]["csrf_token"]},
    )
    assert other.status_code == 409
    assert _count(seeded, goldvote_t) == 3


def test_the_quiz_flags_an_annotator_who_fails_it(
    seeded: Engine, make_client: AppFactory, tmp_path: Path
) -> None:
    _add_golds(seeded, tmp_path, 4, identical=True)  # the right vote is a tie
    client = make_client(gold_rate=0.0, gold_quiz=4)
    for _ in range(4):
        _vote(client, _next(client), "model_a")  # always left: wrong on every identical gold
    with seeded.connect() as conn:
        flagged = conn.execute(select(annotator_t.c.flag_reason).where(annotator_t.c.flagged.is_(True))).all()
    assert len(flagged) == 1 and "onboarding quiz" in str(flagged[0][0])
    _vote(client, _next(client), "model_a")  # a live vote of a flagged annotator: stored, not counted
    assert _count(seeded, vote_t) == 1
    assert all(rating == (1000.0, 0) for rating in live_ratings(seeded).values())


def test_an_annotator_who_passes_the_quiz_is_not_flagged(
    seeded: Engine, make_client: AppFactory, tmp_path: Path
) -> None:
    _add_golds(seeded, tmp_path, 4, identical=True)
    client = make_client(gold_rate=0.0, gold_quiz=4)
    for winner in ("tie", "tie (bothbad)", "tie", "model_b"):  # three of four right: 75% passes
        _vote(client, _next(client), winner)
    with seeded.connect() as conn:
        assert conn.scalar(select(func.count()).where(annotator_t.c.flagged.is_(True))) == 0
    before = live_ratings(seeded)
    _vote(client, _next(client), "model_a")
    assert live_ratings(seeded) != before


def test_removing_the_gold_rows_changes_no_rating(
    seeded: Engine, make_client: AppFactory, tmp_path: Path
) -> None:
    _add_golds(seeded, tmp_path, 30)
    client = make_client(gold_rate=0.2)
    rng = random.Random(5)
    for _ in range(40):
        _vote(client, _next(client), rng.choice(["model_a", "model_b", "tie"]))
    assert _count(seeded, goldvote_t) > 0 and _count(seeded, vote_t) > 0
    request = FitRequest(n_rounds=20, random_state=1)
    counts, digest = load_from_database(seeded, VoteFilter())
    board = compute_leaderboard(counts, request)
    live = live_ratings(seeded)
    with seeded.begin() as conn:
        conn.execute(delete(goldvote_t))
        conn.execute(delete(battle_t).where(battle_t.c.source == "gold"))
        conn.execute(delete(goldbattle_t))
    assert _count(seeded, goldbattle_t) == 0
    counts_after, digest_after = load_from_database(seeded, VoteFilter())
    board_after = compute_leaderboard(counts_after, request)
    assert digest_after == digest
    assert list(board_after.models) == list(board.models)
    assert list(board_after.rating) == list(board.rating)
    assert live_ratings(seeded) == live


def test_gold_settings_are_validated(db_url: str) -> None:
    with pytest.raises(ValueError, match="gold_rate"):
        make_settings(db_url, gold_rate=0.25)
    with pytest.raises(ValueError, match="gold_rate"):
        make_settings(db_url, gold_rate=-0.01)
    assert make_settings(db_url).gold_rate == 0.05


def test_a_retired_gold_is_not_served(seeded: Engine, db_url: str, tmp_path: Path) -> None:
    _add_golds(seeded, tmp_path, 2)
    with seeded.begin() as conn:
        retired_id = conn.scalar(select(func.min(goldbattle_t.c.id)))
        conn.execute(update(goldbattle_t).where(goldbattle_t.c.id == retired_id).values(retired=True))
    service = PairingService(seeded, make_settings(db_url, gold_rate=0.2), rng=random.Random(2))
    service.prepare(1)
    served = {g.gold_id for _ in range(200) if (g := service.pick_gold(1)) is not None}
    assert retired_id not in served and len(served) == 1


def test_the_admin_api_lists_golds_and_annotators_with_their_gold_accuracy(
    seeded: Engine, make_client: AppFactory, tmp_path: Path
) -> None:
    _add_golds(seeded, tmp_path, 3, identical=True)
    client = make_client(gold_rate=0.0, gold_quiz=3)
    for winner in ("tie", "tie", "model_a"):
        _vote(client, _next(client), winner)
    auth = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    golds = client.get("/api/admin/golds", headers=auth)
    assert golds.status_code == 200, golds.text
    listed = golds.json()
    assert [g["kind"] for g in listed] == ["identical"] * 3
    assert sum(g["n_votes"] for g in listed) == 3 and sum(g["n_right"] for g in listed) == 2
    assert client.get("/api/admin/golds").status_code == 401
    annotators = client.get("/api/admin/annotators", params={"all": "true"}, headers=auth)
    assert annotators.status_code == 200, annotators.text
    (row,) = annotators.json()
    assert (row["n_gold"], row["gold_right"]) == (3, 2)
    assert row["gold_low"] < row["gold_accuracy"] < row["gold_high"]


def test_a_gold_vote_answers_as_a_live_vote_would(seeded: Engine, make_client: AppFactory) -> None:
    """Derived golds: the vote ids shown follow the votes' own numbering whatever the battle, the reveal
    names two different models, and the rating change shown is a live vote's step, never applied."""
    with Session(seeded) as session:
        assert derive_golds(session, count=8, rng=random.Random(3)) > 0
        session.commit()
    client = make_client(gold_rate=0.0, gold_quiz=1)  # each new annotator: a gold first, then live
    answers: list[tuple[str, dict[str, Any]]] = []
    for _ in range(2):
        client.cookies.clear()
        for kind in ("gold", "live"):
            before = live_ratings(seeded)
            answer = _vote(client, _next(client), "model_a")
            answers.append((kind, answer))
            ratings = answer["ratings"]
            assert answer["model_a"] != answer["model_b"]
            for side in ("model_a", "model_b"):
                assert ratings[side]["before"] == before.get(answer[side], (1000.0, 0))[0]
            if kind == "gold":
                assert ratings["model_a"]["change"] > 0 > ratings["model_b"]["change"]  # as a live vote's
                assert live_ratings(seeded) == before  # shown, never applied
    assert _count(seeded, goldvote_t) == 2 and _count(seeded, vote_t) == 2
    ids = [answer["vote_id"] for _, answer in answers]
    assert ids == sorted(ids) and len(set(ids)) == len(ids), answers
    with seeded.connect() as conn:
        stored = set(conn.scalars(select(vote_t.c.id)))
    assert stored == {a["vote_id"] for kind, a in answers if kind == "live"}
