"""One entry in one table: a toy online rater and a toy battle-file shape, each added to its table for the
length of a test, reach every reader: the settings, the live board and the pairing, evaluate, import and
recompute. Nothing but the entry and its own code is written for them."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError
from sqlalchemy import create_engine, func, select
from sqlalchemy.engine import Engine
from sqlmodel import Session
from typer.testing import CliRunner

from arena.cli.main import build_app
from arena.settings import Settings, live_config, live_rating_words
from arena.voting.pairing import optimal_design
from leaderboard.data import OUTCOME_STRINGS, Outcome
from leaderboard.evaluation.simulate import simulate_battles
from leaderboard.evaluation.systems import online_raters
from leaderboard.online.raters import OnlineRater, TieMode, davidson_probabilities, score_of
from leaderboard.online.table import RATERS, HeldOutOptions, LiveOptions, RaterEntry
from tests.factories import live_rows, make_settings
from votes.files.formats import SOURCE_FORMATS, BattleFormat, RefusedRow
from votes.migrate import upgrade_database
from votes.tables import vote_t
from votes.voting.ratings import replay_live_rows

#: The toy rater's scale: a 100-point gap means odds of 10 to 1 (Elo needs 400 points for that).
TOY_NATS_PER_POINT = math.log(10.0) / 100.0
TOY_WORDS = "Toy rating (100 points a factor of ten)"


@dataclass(frozen=True)
class ToyState:
    rating: float
    games: int = 0


@dataclass(frozen=True)
class ToyRater(OnlineRater[ToyState]):
    """Elo on a 100-point scale with K = 10: small enough to write here, different enough to be seen."""

    ties: TieMode = "half"
    k: float = 10.0
    tie_nu: float = 0.0  # Davidson tie propensity of the forecasts

    def initial(self) -> ToyState:
        return ToyState(0.0)

    def expected(self, a: ToyState, b: ToyState) -> tuple[float, float, float]:
        return davidson_probabilities((a.rating - b.rating) * TOY_NATS_PER_POINT, self.tie_nu)

    def shown(self, state: ToyState) -> tuple[float, float | None]:
        return state.rating, None

    def _step(self, a: ToyState, b: ToyState, outcome: int) -> tuple[ToyState, ToyState]:
        left = 1.0 / (1.0 + math.exp((b.rating - a.rating) * TOY_NATS_PER_POINT))
        change = self.k * (score_of(outcome) - left)
        return ToyState(a.rating + change, a.games + 1), ToyState(b.rating - change, b.games + 1)


def _toy_live(_options: LiveOptions) -> ToyRater:
    return ToyRater()


def _toy_held_out(options: HeldOutOptions) -> ToyRater:
    return ToyRater(ties=options.ties, tie_nu=options.nu)


@pytest.fixture
def toy_rater(monkeypatch: pytest.MonkeyPatch) -> str:
    """The toy rater's one entry, taken away again after the test."""
    entry = RaterEntry(
        live=_toy_live,
        describe=lambda _options: TOY_WORDS,
        nats_per_point=TOY_NATS_PER_POINT,
        tie_modes=("ignore", "half"),
        held_out={"toy": _toy_held_out},
    )
    monkeypatch.setitem(RATERS, "toy", entry)
    return "toy"


def test_without_its_entry_a_rater_is_no_setting() -> None:
    with pytest.raises(ValidationError, match="Input should be 'elo', 'glicko2' or 'trueskill'"):
        Settings(live_rating="toy")


def test_a_toy_rater_is_a_setting_and_rates_the_live_board(
    toy_rater: str, make_client: Any, seeded: Engine, db_url: str
) -> None:
    settings = make_settings(db_url, live_rating=toy_rater)
    config = live_config(settings)
    assert isinstance(config, ToyRater)
    assert live_rating_words(settings) == TOY_WORDS
    # the site (its optimal pairing reads the toy's ratings on the toy's scale) takes votes through it
    client = make_client(live_rating=toy_rater)
    for winner in ("model_a", "model_b", "model_a", "tie", "model_a", "tie (bothbad)"):
        battle = client.get("/api/battles/next").json()
        answer = client.post(
            "/api/votes",
            json={"token": battle["token"], "winner": winner},
            headers={"X-CSRF-Token": battle["csrf_token"]},
        )
        assert answer.status_code == 200, answer.text
    stored = live_rows(seeded)
    with Session(seeded) as session:
        assert stored == replay_live_rows(session=session, config=config)
    assert sum(int(row["games"]) for row in stored.values()) == 12
    assert all(str(row["rater"]).startswith("ToyRater:") for row in stored.values())
    assert TOY_WORDS in client.get("/leaderboard/live").text


def test_the_pairing_reads_a_toy_rater_on_its_own_scale(toy_rater: str) -> None:
    ids = [1, 2, 3, 4]
    counts = {(1, 2): 30, (1, 3): 4, (2, 4): 9}
    toy = {1: 80.0, 2: 20.0, 3: -10.0, 4: -50.0}
    design = optimal_design(ids, counts=counts, ratings=toy, system=toy_rater)
    # the same strengths written as Elo points (four times as many) give the same design
    as_elo = optimal_design(ids, counts=counts, ratings={m: 4 * r for m, r in toy.items()}, system="elo")
    assert design == pytest.approx(as_elo, abs=1e-12)
    as_if_elo = optimal_design(ids, counts=counts, ratings=toy, system="elo")
    assert design != pytest.approx(as_if_elo, abs=1e-6)  # read as Elo points, the gaps look 4x smaller


@pytest.fixture
def battles_file(tmp_path: Path) -> Path:
    sim = simulate_battles(np.array([1100.0, 1000.0, 950.0, 900.0]), 3000, nu=0.5, random_state=7)
    path = tmp_path / "battles.jsonl"
    with path.open("w", encoding="utf-8") as fh:
        for a, b, o, t in zip(sim.model_a, sim.model_b, sim.outcome, sim.times(), strict=True):
            row = {
                "model_a": sim.models[a],
                "model_b": sim.models[b],
                "winner": OUTCOME_STRINGS[Outcome(int(o))],
                "tstamp": 1.7e9 + 86400 * 30 * float(t),
            }
            fh.write(json.dumps(row) + "\n")
    return path


def test_evaluate_lists_and_scores_a_toy_rater(toy_rater: str, battles_file: Path) -> None:
    names = list(online_raters(tie_rate=0.2))
    assert names[-2:] == ["toy/ignore", "toy/half"]  # its tie modes only, after the table's others
    result = CliRunner().invoke(
        build_app(), ["evaluate", "--from", str(battles_file), "--json", "--rounds", "50"]
    )
    assert result.exit_code == 0, result.output
    rows = {row["method"]: row for row in json.loads(result.output)}
    for name in ("toy/ignore", "toy/half"):
        assert rows[name]["kind"] == "online" and rows[f"{name} (rolling)"]["kind"] == "rolling"
        assert 0 < rows[name]["log_loss"] < math.log(3) and rows[name]["n_test"] == 600
    assert "toy/davidson" not in rows


# -- a toy battle-file shape: duels with a verdict word --------------------------------------------------

#: The toy shape's verdicts, as the outcomes they are.
TOY_VERDICTS = {"left": Outcome.MODEL_A, "right": Outcome.MODEL_B, "draw": Outcome.TIE}
TOY_NOTE = "toy duels: left/right/draw verdicts as model_a/model_b/tie, left shown first"


def _toy_duel(raw: Mapping[str, Any], _baseline: str | None) -> list[dict[str, Any]]:
    verdict = raw.get("verdict")
    if verdict not in TOY_VERDICTS:
        raise RefusedRow(f"'verdict' is {verdict!r}; expected left, right or draw")
    return [{"model_a": raw["first"], "model_b": raw["second"], "winner": TOY_VERDICTS[verdict].label}]


@pytest.fixture
def toy_format(monkeypatch: pytest.MonkeyPatch) -> str:
    """The toy shape's one entry, taken away again after the test."""
    entry = BattleFormat(
        detect=lambda seen: {"first", "second", "verdict"} <= seen, mapper=_toy_duel, note=TOY_NOTE
    )
    monkeypatch.setitem(SOURCE_FORMATS, "toy-duel", entry)
    return "toy-duel"


def _duels(tmp_path: Path) -> tuple[Path, Path]:
    """The same 300 battles as toy duels and as Chatbot Arena battles."""
    rng = np.random.default_rng(5)
    words = {outcome: verdict for verdict, outcome in TOY_VERDICTS.items()}
    duels, battles = tmp_path / "duels.jsonl", tmp_path / "battles.jsonl"
    with duels.open("w", encoding="utf-8") as toy, battles.open("w", encoding="utf-8") as clean:
        for k in range(300):
            a, b = (str(m) for m in rng.choice(["m1", "m2", "m3"], size=2, replace=False))
            # the model with the lower number wins half its battles on the left, and every one on the right
            cycle = (Outcome.MODEL_A, Outcome.MODEL_B, Outcome.TIE, Outcome.MODEL_A)
            outcome = cycle[k % 4] if a < b else Outcome.MODEL_B
            question = f"q{k}"
            toy.write(
                json.dumps({"question_id": question, "first": a, "second": b, "verdict": words[outcome]})
            )
            clean.write(
                json.dumps({"question_id": question, "model_a": a, "model_b": b, "winner": outcome.label})
            )
            toy.write("\n")
            clean.write("\n")
    return duels, battles


def test_import_reads_a_toy_format(toy_format: str, tmp_path: Path) -> None:
    duels, battles = _duels(tmp_path)
    runner = CliRunner()
    for name, args in (("detected", []), ("named", ["--format", toy_format])):
        url = f"sqlite:///{tmp_path / f'{name}.db'}"
        upgrade_database(url)
        result = runner.invoke(build_app(), ["import", str(duels), *args, "--database-url", url])
        assert result.exit_code == 0, result.output
        assert f"{duels}: {toy_format}: {TOY_NOTE}" in result.output
        assert "300 added" in result.output
        store = create_engine(url)
        with store.connect() as conn:
            rows = conn.execute(select(vote_t.c.winner, func.count()).group_by(vote_t.c.winner)).all()
        stored = {str(winner): int(n) for winner, n in rows}
        store.dispose()
        expected: dict[str, int] = {}
        for line in battles.read_text(encoding="utf-8").splitlines():
            winner = json.loads(line)["winner"]
            expected[winner] = expected.get(winner, 0) + 1
        assert stored == expected


def _ratings(folder: Path) -> dict[str, float]:
    with (folder / "leaderboard.csv").open(encoding="utf-8") as fh:
        return {row["model"]: float(row["rating"]) for row in csv.DictReader(fh)}


def test_recompute_reads_a_toy_format_as_the_same_battles(toy_format: str, tmp_path: Path) -> None:
    duels, battles = _duels(tmp_path)
    runner = CliRunner()
    base = ["recompute", "--bootstrap", "0", "--interval", "none", "--no-plots"]
    boards = {}
    for name, args in (
        ("toy", ["--from", str(duels)]),
        ("named", ["--from", str(duels), "--format", toy_format]),
        ("clean", ["--from", str(battles)]),
    ):
        result = runner.invoke(build_app(), [*base, *args, "--out", str(tmp_path / name)])
        assert result.exit_code == 0, result.output
        boards[name] = _ratings(tmp_path / name)
    assert boards["toy"] == pytest.approx(boards["clean"], abs=1e-9)
    assert boards["named"] == boards["toy"]
    refused = runner.invoke(build_app(), [*base, "--from", str(duels), "--format", "toy-duels"])
    assert refused.exit_code != 0 and "'toy-duels' is not one of" in refused.output
