"""The composite on real judges (vicuna80: four LLM judges, 80 questions, 5 models). Each judge in turn
plays the human: its verdicts on the even questions are the "human" votes, on the odd ones held out. The
other three judges are sources on every question. The composite forecasts the held-out verdicts no worse
than the target's votes alone, and ranks the judges' discriminations like their agreement with the target
(at most one swap of neighbours per target: the near ties of the data)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import spearmanr

from leaderboard.composite.board import composite_data, correlation_with_humans, subset_sources
from leaderboard.composite.fit import fit_composite
from leaderboard.composite.model import CompositeFit, CompositeOptions
from leaderboard.data import Outcome
from tests.real_data import VICUNA_JUDGES
from votes.reads.annotated import agreement_input_from_file

FAMILIES = {"gpt4": "openai", "gpt35": "openai", "claude": "anthropic", "bard": "google"}
#: Log-loss (nats per verdict) by which the composite may trail the single source: fitting noise.
TOLERANCE = 0.003


def held_out(target: str) -> tuple[float, float, list[float], list[float]]:
    read = agreement_input_from_file(VICUNA_JUDGES)
    b = read.battles
    assert b.prompt is not None and b.annotator is not None
    mine = b.annotator == read.labels.index(target)
    test_rows = mine & (b.prompt % 2 == 1)
    judges = [label for label in read.labels if label != target]
    families = {**FAMILIES, **{j: FAMILIES[j.removeprefix("llm-")] for j in judges}}
    data = composite_data(b.take(np.flatnonzero(~test_rows)), read.labels, judges=judges, families=families)
    composite = fit_composite(data)
    single = fit_composite(
        subset_sources(data, [0]), CompositeOptions(discrimination=False, self_preference=False)
    )
    test = b.take(np.flatnonzero(test_rows))
    column = np.where(test.outcome == Outcome.MODEL_A, 0, np.where(test.outcome == Outcome.MODEL_B, 2, 1))

    def log_loss(fit: CompositeFit) -> float:
        probs = fit.probabilities(test.model_a, test.model_b)
        return float(-np.mean(np.log(probs[np.arange(len(column)), column])))

    agreement = [correlation_with_humans(data, k)[0] or 0.0 for k in range(1, len(data.sources))]
    return log_loss(composite), log_loss(single), list(composite.discrimination[1:]), agreement


@pytest.mark.parametrize("target", ["llm-gpt4", "llm-gpt35", "llm-claude", "llm-bard"])
def test_composite_forecasts_a_held_out_judge_and_orders_the_others(target: str) -> None:
    composite, single, discrimination, agreement = held_out(target)
    assert composite <= single + TOLERANCE, (composite, single)
    rho = spearmanr(discrimination, agreement).statistic
    assert rho >= 0.5, (discrimination, agreement)
