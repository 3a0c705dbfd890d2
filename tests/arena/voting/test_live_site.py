"""Live standings with each online rater through the site: votes, reveal, board, and replay equality."""

from __future__ import annotations

import re
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import insert, select
from sqlalchemy.engine import Engine
from sqlmodel import Session

from arena.settings import live_config
from tests.factories import live_rows, make_settings
from votes.tables import liverating_t, model_t
from votes.voting.live import rater_identity
from votes.voting.ratings import replay_live_rows

RATERS = ("elo", "glicko2", "trueskill")
# Rating periods far shorter than the time between votes: Glicko-2 rates (and widens) every step.
PERIOD = 0.005


def _vote_by_api(client: TestClient, winner: str) -> dict[str, Any]:
    battle = client.get("/api/battles/next").json()
    response = client.post(
        "/api/votes",
        json={"token": battle["token"], "winner": winner},
        headers={"X-CSRF-Token": battle["csrf_token"]},
    )
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def _vote_by_page(client: TestClient, winner: str) -> str:
    page = client.get("/vote")
    token = re.search(r'name="token" value="([^"]+)"', page.text)
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
    assert token and csrf
    form = {"token": token.group(1), "csrf_token": csrf.group(1), "winner": winner}
    response = client.post("/vote", data=form)
    assert response.status_code == 200, response.text
    return response.text


@pytest.mark.parametrize("rating", RATERS)
def test_votes_through_the_site_equal_the_replay(
    make_client: Any, seeded: Engine, db_url: str, rating: str
) -> None:
    client: TestClient = make_client(live_rating=rating, live_period_seconds=PERIOD)
    other: TestClient = make_client(live_rating=rating, live_period_seconds=PERIOD)
    winners = ["model_a", "model_b", "tie", "model_a", "tie (bothbad)", "model_b"]
    answers = [_vote_by_api(c, w) for w in winners for c in (client, other)]
    pages = [_vote_by_page(client, w) for w in winners[:3]]
    for answer in answers:
        side = answer["ratings"]["model_a"]
        assert side["change"] == side["after"] - side["before"]
        assert (side["deviation"] is not None) is (rating != "elo")
    for page in pages:
        assert ("±" in page) is (rating != "elo")
    config = live_config(make_settings(db_url, live_rating=rating, live_period_seconds=PERIOD))
    stored = live_rows(seeded, with_rater=rating != "elo")
    with Session(seeded) as s:
        replayed = replay_live_rows(session=s, config=config)
    assert stored == replayed
    assert sum(int(row["games"]) for row in stored.values()) == 2 * (len(answers) + len(pages))
    board = client.get("/api/leaderboard").json()
    rated = [row for row in board if row["games"]]
    assert {row["model"]: row["rating"] for row in rated} == {m: r["rating"] for m, r in stored.items()}
    assert all((row["deviation"] is None) is (rating == "elo") for row in rated)
    live_page = client.get("/leaderboard/live")
    assert ("Rating − 2 dev." in live_page.text) is (rating != "elo")


def _put_rows(engine: Engine, rows: dict[str, tuple[float, float | None, int]], rater: str | None) -> None:
    with engine.begin() as conn:
        ids = dict(conn.execute(select(model_t.c.name, model_t.c.id)).all())
        conn.execute(
            insert(liverating_t),
            [
                {"model_id": ids[m], "rating": r, "deviation": d, "games": g, "rater": rater}
                for m, (r, d, g) in rows.items()
            ],
        )


@pytest.mark.parametrize("rank_by", ["rating", "conservative"])
def test_conservative_ranking_puts_a_new_model_below_and_marks_it(
    make_client: Any, seeded: Engine, db_url: str, rank_by: str
) -> None:
    client: TestClient = make_client(live_rating="trueskill", live_rank_by=rank_by)
    identity = rater_identity(live_config(make_settings(db_url, live_rating="trueskill")))
    # A newcomer with a higher mean but a wide deviation, against a settled model.
    _put_rows(seeded, {"alpha-7b": (30.0, 7.0, 2), "bravo-13b": (27.0, 1.0, 400)}, identity)
    board = client.get("/api/leaderboard").json()
    order = [row["model"] for row in board if row["games"]]
    assert order == (["bravo-13b", "alpha-7b"] if rank_by == "conservative" else ["alpha-7b", "bravo-13b"])
    by_model = {row["model"]: row for row in board}
    assert by_model["alpha-7b"]["provisional"] and not by_model["bravo-13b"]["provisional"]
    assert by_model["alpha-7b"]["conservative"] == pytest.approx(16.0)
    page = client.get("/leaderboard/live")
    assert "(provisional)" in page.text
    assert page.text.index("alpha-7b") > page.text.index("bravo-13b") or rank_by == "rating"


def test_a_model_with_few_games_is_provisional_under_the_plain_elo_too(
    make_client: Any, seeded: Engine, db_url: str
) -> None:
    """The plain Elo has no deviation: a model with one game would otherwise sit among the measured ones."""
    client: TestClient = make_client(live_rating="elo", live_provisional_games=20)
    _put_rows(seeded, {"alpha-7b": (1010.0, None, 1), "bravo-13b": (1000.0, None, 20)}, None)
    by_model = {row["model"]: row for row in client.get("/api/leaderboard").json()}
    assert by_model["alpha-7b"]["provisional"] and not by_model["bravo-13b"]["provisional"]
    page = client.get("/leaderboard/live").text
    assert page.count("(provisional)") == 1 and page.index("(provisional)") > page.index("alpha-7b")
    unmarked = make_client(live_rating="elo", live_provisional_games=0)
    assert not any(row["provisional"] for row in unmarked.get("/api/leaderboard").json())


def test_switching_the_setting_rebuilds_the_live_table_at_start_up(
    make_client: Any, seeded: Engine, db_url: str
) -> None:
    elo_client: TestClient = make_client()
    for winner in ("model_a", "model_b", "tie", "model_a"):
        _vote_by_api(elo_client, winner)
    assert {row["rater"] for row in live_rows(seeded).values()} == {None}
    make_client(live_rating="glicko2")  # the app's start-up replays the votes through Glicko-2
    config = live_config(make_settings(db_url, live_rating="glicko2"))
    with Session(seeded) as s:
        assert live_rows(seeded) == replay_live_rows(session=s, config=config)
    assert {row["rater"] for row in live_rows(seeded).values()} == {rater_identity(config)}
