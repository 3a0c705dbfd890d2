"""Model roles on a running site: a judge is never paired, never asked in a live battle, never on the home
page or the live board; a model removed with `arena models remove` leaves them all without a restart."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import insert, select
from sqlalchemy.engine import Engine
from sqlmodel import Session
from typer.testing import CliRunner

from arena.app import create_app
from arena.cli.main import app as cli
from arena.publish.snapshots import publish_snapshot
from leaderboard.bt.request import FitRequest
from leaderboard.snapshot.folder import read_snapshot
from tests.arena.conftest import AppFactory
from tests.arena.voting.live_support import NAMES, open_battle_page, register, stream_turn
from tests.factories import MODEL_NAMES, make_settings
from tests.fake_openai import FakeOpenAI, serve_fake_openai
from votes.catalog.roles import ModelChange, change_model
from votes.db import make_engine
from votes.imports.demo import DEMO_MODELS, load_demo
from votes.migrate import upgrade_database
from votes.names import ModelRole
from votes.reads.filters import VoteFilter
from votes.reads.ledger import write_ledger
from votes.tables import liverating_t, model_t

#: The seeded model made a judge: it answers every catalog prompt, so only its role keeps it out.
JUDGE = MODEL_NAMES[-1]
CONTESTANTS = MODEL_NAMES[:-1]


def cli_run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args), env={"COLUMNS": "250"})
    return result.exit_code, result.output


@pytest.fixture
def fakes() -> Iterator[dict[str, FakeOpenAI]]:
    with serve_fake_openai(FakeOpenAI(answer="one two three four")) as a:
        with serve_fake_openai(FakeOpenAI(answer="five six seven eight")) as b:
            with serve_fake_openai(FakeOpenAI(answer="[[A>B]]")) as judge:
                yield {NAMES[0]: a, NAMES[1]: b, JUDGE: judge}


@pytest.fixture
def arena_site(seeded: Engine, db_url: str, fakes: dict[str, FakeOpenAI]) -> Engine:
    """The seeded catalog, the two live contestants' endpoints, and the judge with an endpoint and a live
    rating (as a judge registered before roles had: it answered live battles and was rated); the store
    upgraded as `arena db upgrade` leaves it for the commands."""
    upgrade_database(db_url)
    register(seeded, [(name, f.base_url, "served") for name, f in fakes.items()], max_retries=0)
    with Session(seeded) as session:
        change_model(session, JUDGE, ModelChange(role="judge"))
        session.commit()
    with seeded.begin() as conn:
        judge_id = conn.execute(select(model_t.c.id).where(model_t.c.name == JUDGE)).scalar_one()
        conn.execute(insert(liverating_t).values(model_id=judge_id, rating=1234.0, games=5))
    return seeded


def _page_models(client: TestClient) -> tuple[set[str], set[str], set[str]]:
    """The models the home page lists, the live board page shows and the live standings API names."""
    home: Any = client.get("/")
    board: Any = client.get("/leaderboard/live")
    api = client.get("/api/leaderboard")
    assert home.status_code == board.status_code == api.status_code == 200
    return (
        {m.name for m in home.context["models"]},
        {s.model for s in board.context["standings"]} | {a.model for a in board.context["availability"]},
        {row["model"] for row in api.json()},
    )


def _vote_everything(client: TestClient) -> set[str]:
    """Vote on every battle the site offers this session; the model names the reveals named."""
    seen: set[str] = set()
    for _ in range(100):
        battle = client.get("/api/battles/next")
        if battle.status_code != 200:
            break
        body = battle.json()
        vote = client.post(
            "/api/votes",
            json={"token": body["token"], "winner": "tie"},
            headers={"X-CSRF-Token": body["csrf_token"]},
        )
        assert vote.status_code == 200, vote.text
        seen |= {vote.json()["model_a"], vote.json()["model_b"]}
    else:
        pytest.fail("the site never ran out of battles")
    return seen


def test_a_judge_is_never_paired_in_a_live_battle_or_on_a_page(
    make_client: AppFactory, arena_site: Engine, fakes: dict[str, FakeOpenAI]
) -> None:
    client = make_client(gold_rate=0.0, repeat_rate=0.0)
    home, board, api = _page_models(client)
    assert home == board == api == {*CONTESTANTS, *NAMES}
    # Every battle of the catalog (the judge answered every prompt too): never the judge.
    assert _vote_everything(client) == set(CONTESTANTS)
    # Live battles: the judge's endpoint is never asked (three endpoints, so a draw among all would have
    # picked it in two battles of three).
    csrf = open_battle_page(client)
    for i in range(6):
        turn = stream_turn(client, f"Question {i}?", csrf)
        assert turn.status == 200 and turn.end["votable"], turn.events
    assert fakes[JUDGE].n_requests == 0
    assert fakes[NAMES[0]].n_requests == fakes[NAMES[1]].n_requests == 6
    home, board, api = _page_models(client)
    assert JUDGE not in home | board | api


def test_a_model_removed_leaves_the_running_site(
    make_client: AppFactory, arena_site: Engine, db_url: str, fakes: dict[str, FakeOpenAI]
) -> None:
    client = make_client(gold_rate=0.0, repeat_rate=0.0)
    gone = CONTESTANTS[0]
    assert gone in _page_models(client)[0]
    state = client.app.state.arena  # type: ignore[attr-defined]
    state.pairing.refresh()  # the catalog as the site holds it, before the removal
    assert cli_run("models", "remove", gone, "--database-url", db_url)[0] == 0
    assert cli_run("models", "remove", NAMES[1], "--database-url", db_url)[0] == 0
    # The pages read the store on each request: gone at once.
    home, board, api = _page_models(client)
    assert gone not in home | board | api and NAMES[1] not in home | board | api
    assert home == {*CONTESTANTS[1:], NAMES[0]}
    # A live battle needs two contestants with endpoints: one is left, so the page says so at once and
    # offers no prompt to send, and no endpoint is asked.
    page = client.get("/battle")
    assert page.status_code == 200 and 'data-state="unavailable"' in page.text
    assert 'name="csrf_token"' not in page.text and fakes[NAMES[0]].n_requests == 0
    # Pairing holds its catalog for ``ttl_s`` (10 s on a running site): its next refresh drops the model.
    state.pairing.ttl_s = 0.0
    state.pairing.refresh()
    assert _vote_everything(client) == set(CONTESTANTS[1:])
    # Brought back, it returns (published boards never changed either way).
    assert cli_run("models", "set", gone, "--active", "--database-url", db_url)[0] == 0
    assert gone in _page_models(client)[0]


def test_models_list_shows_roles_and_judge_refuses_a_contestant(
    arena_site: Engine, db_url: str, fakes: dict[str, FakeOpenAI]
) -> None:
    code, out = cli_run("models", "list", "--database-url", db_url)
    assert code == 0, out
    lines = {line.split("│")[1].strip(): line for line in out.splitlines() if line.count("│") > 3}
    assert "judge" in lines[JUDGE] and "contestant" in lines[NAMES[0]], out
    code, out = cli_run("models", "add", "J2", "--base-url", "http://127.0.0.1:9/v1", "--role", "judge",
                        "--database-url", db_url)  # fmt: skip
    assert code == 0 and "added J2 (judge)" in out, out
    code, out = cli_run("models", "set", "J2", "--role", "referee", "--database-url", db_url)
    assert code == 2 and "contestant, judge, both" in out, out
    # A contestant asked to judge: one line saying what to do, nothing sent to any server.
    code, out = cli_run("judge", "--judge", NAMES[0], "--quiet", "--database-url", db_url)
    assert code == 2, out
    assert out.strip().splitlines() == [
        f"error: {NAMES[0]} is a contestant, not a judge: `arena models set {NAMES[0]} --role judge` "
        "(or --role both, to keep it in battles) lets it judge"
    ]
    code, out = cli_run(
        "judge", "--judge", JUDGE, "--models", f"{JUDGE},{NAMES[0]}", "--database-url", db_url
    )
    assert code == 2 and "is a judge only" in out, out
    code, out = cli_run("generate", "--models", JUDGE, "--quiet", "--database-url", db_url)
    assert code == 2 and f"{JUDGE} is a judge only" in out, out
    # Every contestant's endpoint answers the catalog; the judge's is not asked.
    code, out = cli_run("generate", "--quiet", "--database-url", db_url)
    assert code == 0 and "missing from 2 model(s)" in out, out
    assert fakes[JUDGE].n_requests == 0 and fakes[NAMES[0]].n_requests > 0


@pytest.fixture
def demo_store(db_url: str) -> Iterator[Engine]:
    upgrade_database(db_url)
    engine = make_engine(db_url)
    load_demo(engine, n_votes=300, seed=1)
    try:
        yield engine
    finally:
        engine.dispose()


def test_a_board_leaves_judges_out_and_marks_retired_models(
    demo_store: Engine, db_url: str, tmp_path: Path
) -> None:
    """A model made a judge after it was a side of votes is on no new board: left out by ``exclude_models``,
    so the metadata says so and the ledger of that filter hashes the votes fitted. A retired model stays on
    the boards published with it, marked retired where the site shows them."""
    judge, retired = DEMO_MODELS[0].name, DEMO_MODELS[1].name
    request = FitRequest(n_rounds=5, random_state=1)
    before = publish_snapshot(demo_store, snapshot_dir=tmp_path / "snaps", request=request, plots=False)
    with Session(demo_store) as session:
        change_model(session, judge, ModelChange(role=ModelRole.JUDGE))
        session.commit()
    row = publish_snapshot(demo_store, snapshot_dir=tmp_path / "snaps", request=request, plots=False)
    data = read_snapshot(row.path)
    assert judge in set(read_snapshot(before.path).table["model"]) - set(data.table["model"])
    assert data.metadata["filters"]["exclude_models"] == [judge]
    _, digest = write_ledger(
        demo_store, tmp_path / "ledger.csv", filters=VoteFilter(exclude_flagged=True, exclude_models=(judge,))
    )
    assert digest == row.votes_sha256
    assert cli_run("models", "remove", retired, "--database-url", db_url)[0] == 0
    client = TestClient(
        create_app(make_settings(db_url, snapshot_dir=str(tmp_path / "snaps")), engine=demo_store)
    )
    with client:
        page: Any = client.get(f"/leaderboard/snapshots/{row.id}")
        assert page.status_code == 200 and page.context["retired"] == {retired}
        marked = re.findall(r'<td class="model">([^<]+) <span class="muted retired"', page.text)
        assert marked == [retired]
        assert retired not in {s.model for s in page.context.get("standings", [])}
