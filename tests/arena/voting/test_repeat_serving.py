"""Repeat battles on the site: an annotator's own counted battle served again, sides swapped, at the set
rate and never before 20 of their votes have passed; in the same shape as any battle; the vote stored
apart, never counted, with whether it agrees; tokens naming a vote they may not repeat refused."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, delete, func, select
from sqlalchemy.engine import Engine
from typer.testing import CliRunner

from arena.app import create_app
from arena.cli.main import build_app
from arena.publish.board_reads import load_from_database
from arena.voting.checks import REPEAT_GAP
from arena.voting.pairing_service import PairingService
from leaderboard.bt.compute import compute_leaderboard
from leaderboard.bt.request import FitRequest
from leaderboard.data import Outcome
from tests.factories import ADMIN_TOKEN, live_ratings, make_settings, seed_catalog
from votes.migrate import upgrade_database
from votes.reads.filters import VoteFilter
from votes.review.voters import AnnotatorRow, review_annotators
from votes.tables import battle_t, repeatvote_t, vote_t
from votes.voting.battles import IssuedBattle
from votes.voting.repeat_votes import SelfAgreement, SelfAgreementRule, overall_self_agreement, repeat_agrees


@pytest.mark.parametrize("rate", [0.015, 0.05])
def test_served_repeat_share_is_within_one_point_of_the_rate_and_keeps_the_rules(rate: float) -> None:
    """200 simulated annotators x 130 battles in memory (no store is read: a repeat is chosen from the
    annotator's history in memory): the share among battles that could repeat, each vote repeated at most
    once, at least REPEAT_GAP votes later, with the sides swapped."""
    engine = create_engine("sqlite://")
    service = PairingService(engine, make_settings("sqlite://", repeat_rate=rate), rng=random.Random(3))
    n_open = n_repeat = 0
    next_id = 1
    for annotator in range(1, 201):
        order: dict[int, int] = {}  # vote id -> its place among the annotator's votes
        shown: dict[int, tuple[int, int, int, int, int]] = {}
        repeated: set[int] = set()
        for _ in range(130):
            could = len(order) - REPEAT_GAP + 1 > len(repeated)
            repeat = service.pick_repeat(annotator)
            n_open += could
            if repeat is not None:
                assert could
                n_repeat += 1
                vote = repeat.original_vote_id
                assert vote not in repeated and len(order) - order[vote] >= REPEAT_GAP
                repeated.add(vote)
                c = repeat.choice
                prompt, model_a, model_b, out_a, out_b = shown[vote]
                assert (c.prompt_id, c.output_a.model_id, c.output_b.model_id) == (prompt, model_b, model_a)
                assert (c.output_a.output_id, c.output_b.output_id) == (out_b, out_a)
                continue
            a, b = random.Random(next_id).sample(range(1, 9), 2)
            service.note_vote(
                annotator_id=annotator,
                battle_id=next_id,
                vote_id=next_id,
                prompt_id=next_id,
                model_a_id=a,
                model_b_id=b,
                outputs=(10 * next_id + a, 10 * next_id + b),
            )
            order[next_id] = len(order)
            shown[next_id] = (next_id, a, b, 10 * next_id + a, 10 * next_id + b)
            next_id += 1
    assert n_open > 15_000
    assert abs(n_repeat / n_open - rate) <= 0.01, (n_repeat, n_open)


def test_repeat_agreement_names_the_same_model_and_ties_as_one_class() -> None:
    # the repeat shows the sides swapped: the same model is the other side
    assert repeat_agrees("model_a", Outcome.MODEL_B) and repeat_agrees("model_b", Outcome.MODEL_A)
    assert not repeat_agrees("model_a", Outcome.MODEL_A)
    assert repeat_agrees("tie", Outcome.BOTHBAD) and repeat_agrees("tie (bothbad)", Outcome.TIE)
    assert not repeat_agrees("tie", Outcome.MODEL_A)
    with pytest.raises(ValueError):  # the first vote's winner, as stored, is read back
        repeat_agrees("left", Outcome.MODEL_A)


@pytest.fixture
def site(engine: Engine, db_url: str) -> Iterator[TestClient]:
    """A site whose every battle that can repeat does (a rate above the setting's bound, for the test),
    over a catalog large enough for 30 battles free of revealed answers, and no golds."""
    seed_catalog(engine, n_prompts=40)
    settings = make_settings(db_url, gold_rate=0.0).model_copy(update={"repeat_rate": 1.0})
    with TestClient(create_app(settings, engine=engine, seed=1), base_url="http://testserver") as client:
        yield client


def _next(client: TestClient) -> dict[str, Any]:
    response = client.get("/api/battles/next")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _post(client: TestClient, battle: dict[str, Any], winner: str, token: str | None = None) -> Any:
    return client.post(
        "/api/votes",
        json={"token": token or battle["token"], "winner": winner},
        headers={"X-CSRF-Token": battle["csrf_token"]},
    )


def _vote(client: TestClient, battle: dict[str, Any], winner: str) -> dict[str, Any]:
    response = _post(client, battle, winner)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _shape(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shape(v) for v in value[:1]]
    return type(value).__name__


def _count(engine: Engine, table: Any) -> int:
    with engine.connect() as conn:
        return int(conn.scalar(select(func.count()).select_from(table)) or 0)


def _payload(client: TestClient, token: str) -> dict[str, Any]:
    """What an (our own) battle token carries: read with the site's key, as only the site can."""
    tokens = client.app.state.arena.tokens  # type: ignore[attr-defined]
    payload: dict[str, Any] = json.loads(tokens._fernet.decrypt(token.encode()))
    return payload


def _reissue(client: TestClient, payload: dict[str, Any]) -> str:
    """A token signed with the site's key for this payload: what a leaked key or a bug could produce."""
    token: str = client.app.state.arena.tokens.issue(IssuedBattle.from_dict(payload))  # type: ignore[attr-defined]
    return token


def test_a_repeat_is_blind_swapped_and_stored_apart(site: TestClient, engine: Engine) -> None:
    client = site
    first = _next(client)
    first_payload = _payload(client, first["token"])
    assert "repeat" in first_payload and first_payload["repeat"] is None  # always in the token
    first_result = _vote(client, first, "model_a")
    for _ in range(REPEAT_GAP - 1):
        battle = _next(client)
        assert _payload(client, battle["token"])["repeat"] is None  # not before REPEAT_GAP votes
        _vote(client, battle, "model_b")
    before = live_ratings(engine)
    repeat = _next(client)  # the one vote REPEAT_GAP votes old: the first
    payload = _payload(client, repeat["token"])
    with engine.connect() as conn:
        original_vote, out_a, out_b = conn.execute(
            select(vote_t.c.id, battle_t.c.output_a_id, battle_t.c.output_b_id)
            .join(battle_t, battle_t.c.id == vote_t.c.battle_id)
            .where(battle_t.c.id == first_result["battle_id"])
        ).one()
    assert payload["repeat"] == original_vote
    assert (payload["output_a_id"], payload["output_b_id"]) == (out_b, out_a)  # sides swapped
    assert repeat["prompt"]["text"] == first["prompt"]["text"]
    assert _shape(repeat) == _shape(first) and repeat["expires_in"] == first["expires_in"]
    assert abs(len(repeat["token"]) - len(first["token"])) <= 64
    result = _vote(client, repeat, "model_b")  # the same model as the first time
    assert _shape(result) == _shape(first_result)
    assert (result["model_a"], result["model_b"]) == (first_result["model_b"], first_result["model_a"])
    assert _count(engine, vote_t) == REPEAT_GAP and _count(engine, repeatvote_t) == 1
    assert live_ratings(engine) == before  # no live rating moved
    with engine.connect() as conn:
        row = conn.execute(select(repeatvote_t.c.original_winner, repeatvote_t.c.agreed)).one()
        source = conn.scalar(select(battle_t.c.source).where(battle_t.c.id == result["battle_id"]))
    assert tuple(row) == ("model_a", True) and source == "repeat"
    page = client.get(f"/battles/{result['battle_id']}")
    assert page.status_code == 200 and first["prompt"]["text"].split(":")[0] in page.text
    assert _post(client, repeat, "model_b").json()["replayed"] is True  # a retry answers the first result
    assert _post(client, repeat, "model_a").status_code == 409  # another winner on the same token
    assert _count(engine, repeatvote_t) == 1
    assert _payload(client, _next(client)["token"])["repeat"] is None  # each vote repeated once
    with engine.connect() as conn:
        agreement = overall_self_agreement(conn)
    assert (agreement.n_repeat, agreement.n_agreed) == (1, 1) and agreement.low < 1.0


def test_forged_repeat_tokens_are_refused_and_write_nothing(site: TestClient, engine: Engine) -> None:
    client = site
    battles = []
    for _ in range(REPEAT_GAP):
        battle = _next(client)
        battles.append((battle, _vote(client, battle, "model_a")))
    repeat = _next(client)
    honest = _payload(client, repeat["token"])
    assert honest["repeat"] is not None
    with engine.connect() as conn:
        other_vote = conn.scalar(select(vote_t.c.id).where(vote_t.c.id != honest["repeat"]))
    n_battles = _count(engine, battle_t)
    forged = [
        {**honest, "repeat": other_vote},  # another vote than the battle shown
        {**honest, "repeat": 10_000_000},  # no such vote
        {  # the sides as first shown: not a repeat
            **honest,
            "output_a_id": honest["output_b_id"],
            "output_b_id": honest["output_a_id"],
            "model_a_id": honest["model_b_id"],
            "model_b_id": honest["model_a_id"],
        },
    ]
    for i, payload in enumerate(forged):
        response = _post(client, repeat, "model_a", token=_reissue(client, {**payload, "token_id": f"f{i}"}))
        assert response.status_code == 409, response.text
        assert "repeat" not in response.text.lower()
    # a counted battle on the same prompt and pair as a counted vote: one counted judgement per person
    counted = _reissue(client, {**honest, "repeat": None, "token_id": "counted"})
    assert _post(client, repeat, "model_a", token=counted).status_code == 409
    # tampered bytes: not ours at all
    tampered = repeat["token"][:-4] + ("AAAA" if not repeat["token"].endswith("AAAA") else "BBBB")
    assert _post(client, repeat, "model_a", token=tampered).status_code == 400
    assert _count(engine, battle_t) == n_battles and _count(engine, repeatvote_t) == 0
    assert _count(engine, vote_t) == REPEAT_GAP
    assert _vote(client, repeat, "tie")["replayed"] is False  # the honest token still votes


def test_removing_the_repeat_rows_changes_no_rating_and_the_review_reports_them(
    site: TestClient, engine: Engine, db_url: str
) -> None:
    client = site
    rng = random.Random(5)
    for _ in range(34):
        _vote(client, _next(client), rng.choice(["model_a", "model_b", "tie"]))
    n_repeats = _count(engine, repeatvote_t)
    assert n_repeats >= 5 and _count(engine, vote_t) == 34 - n_repeats
    auth = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    listed = client.get("/api/admin/annotators", params={"all": "true"}, headers=auth)
    assert listed.status_code == 200, listed.text
    (row,) = listed.json()
    assert row["n_repeat"] == n_repeats and row["n_votes"] == 34 - n_repeats
    assert row["self_agreement_low"] <= row["self_agreement"] <= row["self_agreement_high"]
    with engine.connect() as conn:
        agreed = int(conn.scalar(select(func.count()).where(repeatvote_t.c.agreed.is_(True))) or 0)
    assert row["repeat_agreed"] == agreed
    runner = CliRunner()
    upgrade_database(db_url)  # the command wants the schema at head; create_all's tables are kept
    listed_cli = runner.invoke(build_app(), ["annotators", "--all", "--json", "--database-url", db_url])
    assert listed_cli.exit_code == 0, listed_cli.output
    cli_row, overall = map(json.loads, listed_cli.output.splitlines())
    assert (cli_row["n_repeat"], cli_row["repeat_agreed"]) == (n_repeats, agreed)
    pooled = overall["overall"]["self_agreement"]
    assert (pooled["n_repeat"], pooled["n_agreed"]) == (n_repeats, agreed)
    assert pooled["low"] <= pooled["share"] <= pooled["high"]
    report = runner.invoke(build_app(), ["agreement", "--json", "--database-url", db_url])
    assert report.exit_code == 0, report.output
    assert json.loads(report.output)["self_agreement"] == pooled
    text = runner.invoke(build_app(), ["agreement", "--database-url", db_url], env={"COLUMNS": "200"})
    assert f"Self-agreement on repeat battles: {agreed} of {n_repeats}" in text.output
    wide = {"COLUMNS": "250"}
    table = runner.invoke(build_app(), ["annotators", "--all", "--database-url", db_url], env=wide)
    assert "self (95%)" in table.output and f"{agreed}/{n_repeats} (" in table.output
    assert f"Self-agreement on repeat battles: {agreed} of {n_repeats}" in table.output
    request = FitRequest(n_rounds=20, random_state=1)
    counts, digest = load_from_database(engine, VoteFilter())
    board = compute_leaderboard(counts, request)
    live = live_ratings(engine)
    with engine.begin() as conn:
        conn.execute(delete(repeatvote_t))
        conn.execute(delete(battle_t).where(battle_t.c.source == "repeat"))
    counts_after, digest_after = load_from_database(engine, VoteFilter())
    board_after = compute_leaderboard(counts_after, request)
    assert digest_after == digest
    assert list(board_after.models) == list(board.models)
    assert list(board_after.rating) == list(board.rating)
    assert live_ratings(engine) == live


def test_repeat_rate_is_validated() -> None:
    with pytest.raises(ValueError, match="repeat_rate"):
        make_settings("sqlite://", repeat_rate=0.06)
    with pytest.raises(ValueError, match="repeat_rate"):
        make_settings("sqlite://", repeat_rate=-0.01)
    assert make_settings("sqlite://").repeat_rate == 0.015


def test_low_self_agreement_is_a_review_reason_only_with_enough_repeats(
    site: TestClient, engine: Engine
) -> None:
    """Always the left side: with the sides swapped, no repeat agrees; the reason waits for 10 repeats."""
    client = site

    def review() -> AnnotatorRow:
        (row,) = review_annotators(engine)
        return row

    for _ in range(REPEAT_GAP + 2 * (SelfAgreementRule().min_repeats - 1)):
        _vote(client, _next(client), "model_a")
    row = review()
    assert (row.n_repeat, row.repeat_agreed) == (SelfAgreementRule().min_repeats - 1, 0)
    assert "self-agreement" not in (row.reason or "")
    for _ in range(2):
        _vote(client, _next(client), "model_a")
    row = review()
    assert row.n_repeat == SelfAgreementRule().min_repeats and row.self_agreement == 0.0
    assert row.suspicious and "self-agreement 0 of 10 repeats" in (row.reason or "")


def test_the_self_agreement_rule_needs_enough_repeats_and_a_low_upper_bound() -> None:
    rule = SelfAgreementRule(min_repeats=10, max_high=0.6)
    assert not SelfAgreement(9, 0, 0.0, 0.0, 0.3).is_low(rule)  # too few repeats
    assert SelfAgreement(10, 0, 0.0, 0.0, 0.28).is_low(rule)
    assert not SelfAgreement(10, 5, 0.5, 0.24, 0.76).is_low(rule)  # a coin, not yet told apart
