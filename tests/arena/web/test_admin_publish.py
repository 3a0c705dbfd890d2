"""The admin API's publish: its JSON body is one fit request, and a request no board can be made with is
refused with the fit's own reason before anything is read or written."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from leaderboard import simulate_battles
from leaderboard.snapshot.folder import read_snapshot
from tests.arena.conftest import AppFactory
from tests.factories import ADMIN_TOKEN, write_jsonl

AUTH = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
WINNER = np.array(["model_a", "model_b", "tie", "tie (bothbad)"])


def _battles(path: Path) -> Path:
    sim = simulate_battles(np.linspace(900, 1100, 4), 400, random_state=5, tie_rate=0.2)
    return write_jsonl(
        path,
        (
            {"model_a": f"m{a}", "model_b": f"m{b}", "winner": str(w)}
            for a, b, w in zip(sim.model_a, sim.model_b, WINNER[sim.outcome], strict=True)
        ),
    )


def test_the_body_is_the_fit_request_of_the_published_board(make_client: AppFactory, tmp_path: Path) -> None:
    snapshots = tmp_path / "snaps"
    client = make_client(snapshot_dir=str(snapshots))
    battles = _battles(tmp_path / "battles.jsonl")
    with battles.open("rb") as fh:
        imported = client.post("/api/admin/import", files={"file": (battles.name, fh)}, headers=AUTH)
    assert imported.status_code == 200, imported.text
    body = {"method": "davidson", "n_rounds": 10, "seed": 3}
    published = client.post("/api/admin/publish", json=body, headers=AUTH)
    assert published.status_code == 200, published.text
    metadata = read_snapshot(snapshots / published.json()["id"]).metadata
    options = metadata["options"]
    assert (options["method"], options["n_rounds"], options["random_state"]) == ("davidson", 10, 3)
    assert (options["interval"], options["level"], options["extra"]) == ("bootstrap", 0.95, {})
    assert metadata["method"] == "davidson" and json.dumps(metadata)  # a JSON document


def test_a_request_no_board_can_be_made_with_is_refused_before_any_read(
    make_client: AppFactory, tmp_path: Path
) -> None:
    snapshots = tmp_path / "snaps"
    client = make_client(snapshot_dir=str(snapshots))
    refused = client.post("/api/admin/publish", json={"method": "nope"}, headers=AUTH)
    assert refused.status_code == 400
    assert refused.json()["detail"].startswith("Cannot publish: unknown method 'nope'; available: bt, ")
    assert not snapshots.exists()
