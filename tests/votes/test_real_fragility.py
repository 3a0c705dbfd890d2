"""The fragility certificate on real votes (the LLM-judge verdicts of tests/data).

Three real boards, each one the tests already rank: every verdict of the four LLM judges (the board that
`arena recompute --from` and `arena publish` build from the file), GPT-4's verdicts alone (the sharpest
judge in the rater-ability fit; each judge's own board is what the per-judge position and composite
tests fit) and Bard's alone (the strongest first-answer preference, +351 Elo, so the plain and the
position-aware fit differ most). Counts of one or two votes are checked to be the true minimum (no
removal of one vote fewer swaps the pair); GPT-4's three-vote pair is checked exhaustively when slow
tests run.
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

from leaderboard import Battles, PairCounts, fit_bt
from leaderboard.bt.request import method_spec
from leaderboard.bt.spec import UnboundedRatingWarning
from leaderboard.design.fragility import Fragility, fragility, remove_votes
from tests.real_data import VICUNA_JUDGES
from votes.files.columns import read_battles

METHODS = ("bt", "davidson-position")
#: Per board and method: (#1 changes after, by whom) and each adjacent pair's votes to swap, board order.
#: None: no swap within the search limit (5% of the votes).
CERTIFICATES: dict[
    tuple[str, str], tuple[tuple[int | None, str | None], list[tuple[str, str, int | None]]]
] = {
    ("all", "bt"): (
        (None, None),
        [
            ("gpt4", "claude", None),
            ("claude", "vicuna-13b", None),
            ("vicuna-13b", "gpt35", 65),
            ("gpt35", "bard", 152),
        ],
    ),
    ("all", "davidson-position"): (
        (None, None),
        [
            ("gpt4", "claude", None),
            ("claude", "vicuna-13b", None),
            ("vicuna-13b", "gpt35", 55),
            ("gpt35", "bard", 125),
        ],
    ),
    ("llm-gpt4", "bt"): (
        (None, None),
        [
            ("gpt4", "claude", None),
            ("claude", "vicuna-13b", None),
            ("vicuna-13b", "gpt35", 5),
            ("gpt35", "bard", 63),
        ],
    ),
    ("llm-gpt4", "davidson-position"): (
        (None, None),
        [
            ("gpt4", "claude", None),
            ("claude", "vicuna-13b", None),
            ("vicuna-13b", "gpt35", 3),
            ("gpt35", "bard", None),
        ],
    ),
    ("llm-bard", "bt"): (
        (43, "claude"),
        [
            ("gpt4", "claude", 43),
            ("claude", "gpt35", None),
            ("gpt35", "vicuna-13b", 1),
            ("vicuna-13b", "bard", 31),
        ],
    ),
    ("llm-bard", "davidson-position"): (
        (40, "claude"),
        [
            ("gpt4", "claude", 40),
            ("claude", "gpt35", None),
            ("gpt35", "vicuna-13b", 1),
            ("vicuna-13b", "bard", 17),
        ],
    ),
}


def board(name: str) -> Battles:
    battles = read_battles(VICUNA_JUDGES).battles
    if name == "all":
        return battles
    if battles.annotator is None:
        raise ValueError("the judge column was not read")
    return battles.take(np.flatnonzero(battles.annotator == battles.annotator_names.index(name)))


def certify(name: str, method: str) -> tuple[PairCounts, Fragility]:
    counts = board(name).counts()
    return counts, fragility(counts, spec=method_spec(method))


def swapped_after(counts: PairCounts, method: str, removed: np.ndarray, upper: str, lower: str) -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnboundedRatingWarning)
        fit = fit_bt(remove_votes(counts, removed), spec=method_spec(method))
    return bool(fit.rating[fit.models.index(lower)] > fit.rating[fit.models.index(upper)])


def no_smaller_removal_swaps(counts: PairCounts, method: str, k: int, upper: str, lower: str) -> bool:
    """No removal of ``k - 1`` votes (every multiset of cells) puts ``lower`` above ``upper``."""
    for cells in itertools.combinations_with_replacement(range(counts.n_cells), k - 1):
        removed = np.bincount(np.array(cells, dtype=np.int64), minlength=counts.n_cells).astype(float)
        if np.all(removed <= counts.vote_counts) and swapped_after(counts, method, removed, upper, lower):
            return False
    return True


@pytest.mark.parametrize(("name", "method"), list(CERTIFICATES))
def test_certificate_on_real_boards(name: str, method: str) -> None:
    counts, cert = certify(name, method)
    top, pairs = CERTIFICATES[(name, method)]
    assert cert.max_votes == int(0.05 * counts.vote_counts.sum())
    assert cert.top == top
    assert list(cert.pairs) == pairs
    for upper, lower, k in cert.pairs:
        if k is not None and k <= 2:  # one or two votes: the count is the true minimum
            assert no_smaller_removal_swaps(counts, method, k, upper, lower), (upper, lower, k)


@pytest.mark.slow
def test_three_votes_are_the_minimum_on_gpt4s_board() -> None:
    """GPT-4's close pair under davidson-position: no two votes swap it (every pair of cells refitted)."""
    counts, cert = certify("llm-gpt4", "davidson-position")
    assert ("vicuna-13b", "gpt35", 3) in cert.pairs
    assert no_smaller_removal_swaps(counts, "davidson-position", 3, "vicuna-13b", "gpt35")
