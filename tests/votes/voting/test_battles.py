"""Battles and votes in flight: one dictionary form each, read back to the same value through JSON."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from leaderboard.data import Outcome
from votes.voting.battles import CatalogRow, IssuedBattle, VoteRequest, VoteResult, issue_battle


def _battle(pair_probability: float | None = 0.25) -> IssuedBattle:
    return issue_battle(
        token_id="t-1",
        annotator_id=7,
        prompt_id=3,
        output_a=CatalogRow(prompt_id=3, output_id=11, model_id=1),
        output_b=CatalogRow(prompt_id=3, output_id=12, model_id=2),
        pair_probability=pair_probability,
        issued_at=datetime(2025, 3, 1, 12, 0, 0, 123456, tzinfo=UTC),
    )


@pytest.mark.parametrize("probability", [0.25, None])
def test_issued_battle_and_vote_request_survive_json(probability: float | None) -> None:
    battle = _battle(probability)
    assert IssuedBattle.from_dict(json.loads(json.dumps(battle.to_dict()))) == battle
    request = VoteRequest(
        battle=battle,
        winner=Outcome.BOTHBAD,
        client_hash="c" * 32,
        idempotency_key="7:k",
        voted_at=datetime(2025, 3, 1, 12, 0, 5, tzinfo=UTC),
        request_id="req-0123abcd",
    )
    assert VoteRequest.from_dict(json.loads(json.dumps(request.to_dict()))) == request
    bare = VoteRequest(battle=battle, winner=Outcome.MODEL_A)
    assert VoteRequest.from_dict(json.loads(json.dumps(bare.to_dict()))) == bare
    repeat = replace(battle, repeat=41)  # a repeat of vote 41 travels to the writer as such
    assert battle.counted and not repeat.counted and "repeat" in battle.to_dict()
    on_repeat = replace(bare, battle=repeat)
    assert VoteRequest.from_dict(json.loads(json.dumps(on_repeat.to_dict()))) == on_repeat


def test_vote_result_from_live_elo_and_back() -> None:
    elo = {"a_before": 1000.0, "a_after": 1008.0, "b_before": 990.0, "b_after": 982.0}
    result = VoteResult.from_live_elo(elo, vote_id=5, battle_id=4, winner="model_a", model_a="x", model_b="y")
    assert (result.rating_a_after, result.rating_b_after, result.replayed) == (1008.0, 982.0, False)
    assert VoteResult.from_dict(json.loads(json.dumps(result.to_dict()))) == result
    unknown = VoteResult.from_live_elo(None, vote_id=5, battle_id=4, winner="tie", model_a="x", model_b="y")
    assert math.isnan(unknown.rating_a_before) and math.isnan(unknown.rating_b_after)


def test_a_battle_needs_two_models_of_its_prompt() -> None:
    row = CatalogRow(prompt_id=3, output_id=11, model_id=1)
    with pytest.raises(ValueError, match="two different models"):
        issue_battle(
            token_id="t", annotator_id=1, prompt_id=3, output_a=row, output_b=row, pair_probability=None
        )
    other = CatalogRow(prompt_id=4, output_id=12, model_id=2)
    with pytest.raises(ValueError, match="prompt"):
        issue_battle(
            token_id="t", annotator_id=1, prompt_id=3, output_a=row, output_b=other, pair_probability=None
        )


def test_a_malformed_dictionary_is_refused() -> None:
    data = _battle().to_dict()
    with pytest.raises(KeyError):
        IssuedBattle.from_dict({k: v for k, v in data.items() if k != "model_a_id"})
    with pytest.raises(ValueError):
        IssuedBattle.from_dict({**data, "issued_at": "yesterday"})
    with pytest.raises(ValueError):
        IssuedBattle.from_dict({**data, "repeat": "vote 3"})


def test_a_request_id_that_is_not_short_text_is_refused() -> None:
    data = VoteRequest(battle=_battle(), winner=Outcome.MODEL_A).to_dict()
    assert data["request_id"] is None
    with pytest.raises(ValueError, match="request_id"):
        VoteRequest.from_dict({**data, "request_id": "x" * 65})
    with pytest.raises(ValueError, match="request_id"):
        VoteRequest.from_dict({**data, "request_id": {"nested": 1}})
