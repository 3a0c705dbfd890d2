"""The board's precision on the published pages: provisional marks, votes to separate each neighbour pair,
the board's votes to its target width, and the fairness ledger, all as written in the snapshot."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.engine import Engine

from arena.app import create_app
from arena.publish.recompute import SliceSpec
from arena.publish.snapshots import publish_slices
from arena.web.routes.snapshots import _precision
from leaderboard.bt.request import FitRequest
from tests.factories import make_settings
from votes.db import make_engine
from votes.imports.demo import load_demo
from votes.migrate import upgrade_database
from votes.models import Snapshot
from votes.tables import model_t, vote_t
from votes.voting.live_battles import count_live_use
from votes.voting.pairing_weights import record_pairing_weights

N_VOTES = 2000  # enough for some intervals to narrow below +/-25 while others stay wide


class _Table(HTMLParser):
    """The cells of one table (by id): per body row, (tag, class, text) for each cell; header cells too."""

    def __init__(self, table_id: str) -> None:
        super().__init__()
        self.table_id = table_id
        self.inside = False
        self.section = ""
        self.head: list[tuple[str, str]] = []
        self.rows: list[list[tuple[str, str, str]]] = []
        self.cell: list[str] | None = None
        self.cell_tag = ""
        self.cell_class = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "table" and a.get("id") == self.table_id:
            self.inside = True
        elif self.inside and tag in ("thead", "tbody"):
            self.section = tag
        elif self.inside and tag == "tr" and self.section == "tbody":
            self.rows.append([])
        elif self.inside and tag in ("th", "td"):
            self.cell, self.cell_tag, self.cell_class = [], tag, a.get("class") or ""
            if tag == "th" and self.section == "thead":
                self.head.append((a.get("scope") or "", a.get("class") or ""))

    def handle_endtag(self, tag: str) -> None:
        if tag == "table" and self.inside:
            self.inside = False
        elif self.inside and tag in ("th", "td") and self.cell is not None:
            if self.section == "tbody":
                self.rows[-1].append((self.cell_tag, self.cell_class, " ".join("".join(self.cell).split())))
            self.cell = None

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell.append(data)


def _table(html: str, table_id: str) -> _Table:
    parser = _Table(table_id)
    parser.feed(html)
    assert parser.rows, f"no table {table_id}"
    return parser


@pytest.fixture(scope="module")
def published(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[TestClient, Snapshot, dict[str, Any]]]:
    tmp_path = tmp_path_factory.mktemp("precision")
    db_url = f"sqlite:///{tmp_path}/arena.db"
    upgrade_database(db_url)
    engine: Engine = make_engine(db_url)
    load_demo(engine, n_votes=N_VOTES, seed=5)
    with engine.connect() as conn:
        first = conn.execute(select(model_t.c.id, model_t.c.name).order_by(model_t.c.name)).first()
    assert first is not None
    for failed in (False, True, False, False):  # a live model that failed once in four generations
        count_live_use(engine, int(first.id), tokens=10, failed=failed)
    with engine.connect() as conn:
        ids = sorted(int(i) for (i,) in conn.execute(select(model_t.c.id)))
    # The weights the live pairing recorded: an even start, then the first model favoured a day later.
    start = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
    record_pairing_weights(engine, {m: 1 / len(ids) for m in ids}, policy="optimal", now=start)
    favoured = {m: (0.5 if m == ids[0] else 0.5 / (len(ids) - 1)) for m in ids}
    record_pairing_weights(engine, favoured, policy="optimal", now=start + timedelta(days=1))
    (row,) = publish_slices(
        engine,
        snapshot_dir=tmp_path / "snapshots",
        request=FitRequest(n_rounds=20, random_state=3),
        slices=[SliceSpec()],
        plots=False,
    )
    metadata = json.loads((Path(row.path) / "metadata.json").read_text())
    app = create_app(make_settings(db_url, snapshot_dir=str(tmp_path / "snapshots")), engine=engine, seed=1)
    with TestClient(app, base_url="http://testserver") as client:
        yield client, row, metadata
    engine.dispose()


@pytest.mark.parametrize("page", ["snapshot", "leaderboard"])
def test_pages_show_the_snapshots_precision(
    published: tuple[TestClient, Snapshot, dict[str, Any]], page: str
) -> None:
    client, row, metadata = published
    precision, availability = metadata["precision"], metadata["availability"]
    url = f"/leaderboard/snapshots/{row.id}" if page == "snapshot" else "/leaderboard"
    response = client.get(url)
    assert response.status_code == 200
    html = response.text
    provisional = set(precision["provisional"])
    below = {p["upper"]: p["votes"] for p in precision["votes_needed_adjacent"]}
    models = {e["model"] for e in precision["ledger"]}
    assert provisional and provisional != models, "some intervals are still wider than +/-25, some not"
    assert len(below) >= 2

    standings = _table(html, "published-standings")
    column = [i for i, (_, cls) in enumerate(standings.head) if cls == "num"]
    assert all(scope == "col" for scope, _ in standings.head)
    separate = [r for r in standings.rows for tag, cls, _ in r if "separate" in cls]
    assert len(separate) == len(standings.rows) and column
    for k, cells in enumerate(standings.rows):
        model_cell = next(text for _, cls, text in cells if cls == "model")
        name = model_cell.removesuffix(" provisional")
        assert (name in provisional) == model_cell.endswith(" provisional"), model_cell
        votes = next(text for _, cls, text in cells if "separate" in cls)
        expected = below.get(name)
        if k == len(standings.rows) - 1 or expected is None:
            assert votes == "–"
        else:
            assert votes == f"{expected:,}", (name, votes, expected)

    board = precision["votes_needed_board"]
    assert isinstance(board, int) and board > 0
    assert f"<strong>{board:,}</strong>" in html

    ledger = _table(html, "fairness-ledger")
    assert [scope for scope, _ in ledger.head] == ["col"] * 5
    assert [cls for _, cls in ledger.head] == ["", "num", "num", "num", "num"]
    shown = {r[0][2]: (r[1][2], r[2][2]) for r in ledger.rows}
    in_force = {r[0][2]: r[3][2] for r in ledger.rows}
    live = {r[0][2]: r[4][2] for r in ledger.rows}
    newest = metadata["sampling_weights_by_day"]["2026-03-03"]
    assert in_force == {m: f"{newest[m] * 100:.1f}%" for m in in_force}
    assert "on 2026-03-03" in html
    (asked,) = availability
    assert availability[asked] == {"generations": 4, "failures": 1, "share": 0.75}
    assert live == {m: "75.0% of 4" if m == asked else "–" for m in live}
    assert all(r[0][0] == "th" for r in ledger.rows), "each ledger row is headed by its model"
    entries = precision["ledger"]
    assert len(shown) == len(entries) == len(standings.rows)
    for e in entries:
        assert shown[e["model"]] == (f"{e['battle_share'] * 100:.1f}%", f"{e['sampling_share'] * 100:.1f}%")
    assert abs(sum(e["battle_share"] for e in entries) - 1.0) < 1e-4

    weekly = metadata["battle_share_by_week"]
    weeks = sorted(weekly)[-8:]
    by_week = _table(html, "battle-share-by-week-table")
    assert len(by_week.head) == 1 + len(weeks)
    for cells in by_week.rows:
        model = cells[0][2]
        expected = [f"{weekly[w][model] * 100:.1f}%" if model in weekly[w] else "–" for w in weeks]
        assert [text for _, _, text in cells[1:]] == expected, model


def test_snapshot_publishes_the_pairing_weights_by_day(
    published: tuple[TestClient, Snapshot, dict[str, Any]],
) -> None:
    """The ledger's other history: the weights the live pairing had in force, the last record of each day."""
    _, _, metadata = published
    by_day = metadata["sampling_weights_by_day"]
    assert list(by_day) == ["2026-03-02", "2026-03-03"]
    models = {e["model"] for e in metadata["precision"]["ledger"]}
    for shares in by_day.values():
        assert set(shares) == models and abs(sum(shares.values()) - 1.0) < 1e-4
    assert len(set(by_day["2026-03-02"].values())) == 1
    assert sorted(by_day["2026-03-03"].values())[-1] == 0.5


def test_snapshot_publishes_the_weekly_share_of_battles(
    published: tuple[TestClient, Snapshot, dict[str, Any]],
) -> None:
    """The ledger's history: per week, each model's share of that week's battles, summing to one, and
    weighted by the weeks' battles it gives back the share so far."""
    _, row, metadata = published
    weekly = metadata["battle_share_by_week"]
    assert weekly, "the demo votes span at least one week"
    for week, shares in weekly.items():
        assert date.fromisoformat(week).weekday() == 0, week
        assert abs(sum(shares.values()) - 1.0) < 1e-4
        assert set(shares) <= {e["model"] for e in metadata["precision"]["ledger"]}
    engine = make_engine(f"sqlite:///{Path(row.path).parents[1]}/arena.db")
    with engine.connect() as conn:
        created = [t for (t,) in conn.execute(select(vote_t.c.created_at))]
    engine.dispose()
    assert {(t.date() - timedelta(days=t.weekday())).isoformat() for t in created} == set(weekly)


def test_precision_from_older_or_odd_metadata() -> None:
    """Snapshots published before the precision block render without it; odd values show as unknown."""
    assert _precision({}) is None
    assert _precision({"precision": "forged"}) is None
    undated = _precision({"precision": {"provisional": []}, "sampling_weights_by_day": {"2026-01-01": "x"}})
    assert undated is not None and undated["in_force_day"] is None and undated["weeks"] == []
    odd = _precision(
        {
            "precision": {
                "provisional": ["a"],
                "votes_needed_board": True,
                "votes_needed_adjacent": [{"upper": "a", "votes": -3}, {"upper": "b", "votes": 12}, "x"],
                "ledger": [{"model": "a", "battle_share": None}, 7],
            }
        }
    )
    assert odd is not None
    assert odd["board"] is None and odd["below"] == {"a": None, "b": 12}
    assert odd["ledger"] == [
        {
            "model": "a",
            "battle_share": 0.0,
            "sampling_share": 0.0,
            "live": None,
            "in_force": None,
            "weekly": [],
        }
    ]
    assert odd["has_live"] is False
