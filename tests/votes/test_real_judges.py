"""The real LLM-judge verdicts of tests/data: each judge's position term, and the rater-ability model
against plain davidson-position on held-out votes."""

from __future__ import annotations

import math

import numpy as np
import pytest

from leaderboard.evaluation.calibration import paired_bootstrap_difference, vote_log_losses
from leaderboard.evaluation.held_out import RATERS_METHOD, evaluate_methods, split_battles
from leaderboard.quality.judge_position import judge_positions
from leaderboard.quality.rater_ability import fit_rater_ability, rater_ability_proba
from tests.real_data import VICUNA_JUDGES
from votes.files.columns import read_battles

#: Each judge's own davidson-position fit: left-side advantage in Elo and its sandwich standard error.
POSITION = {
    "llm-bard": (351.00, 16.01),
    "llm-claude": (-134.89, 11.04),
    "llm-gpt35": (-7.45, 11.98),
    "llm-gpt4": (166.98, 14.39),
}


def test_each_judge_has_its_own_position_term() -> None:
    battles = read_battles(VICUNA_JUDGES).battles
    assert battles.annotator_names == ("llm-bard", "llm-claude", "llm-gpt35", "llm-gpt4")
    assert battles.prompt is not None and int(battles.prompt.max()) + 1 == 80  # question_id kept
    result = judge_positions(battles, battles.annotator_names)
    assert not result.skipped
    found = {j[0]: (j[2], j[3]) for j in result.judges}
    assert found.keys() == POSITION.keys()
    for judge, (estimate, se) in POSITION.items():
        assert found[judge][0] == pytest.approx(estimate, abs=0.05), judge
        assert found[judge][1] == pytest.approx(se, abs=0.05), judge
    # judges that disagree this much: the pooled interval spans their spread, not the votes' count
    assert result.tau == pytest.approx(203.0, abs=0.5)
    low, high = result.pooled[1], result.pooled[2]
    assert low < -100 and high > 300
    # Bard's left-side preference and Claude's right-side one are both far outside each other's interval
    bard = next(j for j in result.judges if j[0] == "llm-bard")
    claude = next(j for j in result.judges if j[0] == "llm-claude")
    assert bard[5] > 300 and claude[6] < -100


def test_rater_ability_against_davidson_position_on_held_out_votes() -> None:
    battles = read_battles(VICUNA_JUDGES).battles
    fit = fit_rater_ability(battles)
    assert fit.labels == battles.annotator_names
    # GPT-4 separates the answers most sharply, Claude least
    assert int(np.argmax(fit.discrimination)) == fit.labels.index("llm-gpt4")
    assert int(np.argmin(fit.discrimination)) == fit.labels.index("llm-claude")
    train, test = split_battles(battles, test_fraction=0.2, random_state=0)
    rows = {r.method: r for r in evaluate_methods(train, test)}
    raters, plain = rows[RATERS_METHOD], rows["davidson-position"]
    assert raters.n_test == plain.n_test == 1312
    assert math.isfinite(raters.log_loss) and math.isfinite(plain.log_loss)
    # each judge's own side term: far better held-out forecasts than one shared term
    assert raters.log_loss == pytest.approx(0.7314, abs=5e-4)
    assert plain.log_loss == pytest.approx(0.8176, abs=5e-4)
    difference, low, high = paired_bootstrap_difference(raters.vote_losses, plain.vote_losses)
    assert difference == pytest.approx(0.0862, abs=5e-4) and 0.05 < low < high < 0.12
    # the shared-term model gained little on the same split: the judges' side biases were the story
    shared = fit_rater_ability(train)
    shared_loss = float(vote_log_losses(rater_ability_proba(shared, test), test.outcome).mean())
    assert shared_loss == pytest.approx(0.8131, abs=5e-4)
    # per judge, the row's own left-side terms: Bard's and Claude's opposite leanings, as in their own fits
    own = {
        k.removeprefix("position:"): v
        for k, v in raters.parameters_fitted.items()
        if k.startswith("position:")
    }
    assert own["llm-bard"]["ci_low"] > 250 and own["llm-claude"]["ci_high"] < -100
    assert own["llm-gpt35"]["ci_low"] < 0 < own["llm-gpt35"]["ci_high"]
    # the pooled term's interval spans the judges' spread, not the few Elo of 5,248 votes
    pooled = raters.parameters_fitted["position_advantage_elo"]
    assert pooled["ci_low"] < -50 and pooled["ci_high"] > 200
