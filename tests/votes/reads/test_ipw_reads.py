"""``--ipw``: each stored vote weighs the inverse of its battle's logged pair probability, scaled to mean 1,
alike in the SQL cells and in the per-vote read; votes that logged no probability are refused, not guessed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import select, update
from sqlalchemy.engine import Engine
from typer.testing import CliRunner

from arena.cli.main import build_app
from leaderboard.battles import Battles
from votes.imports.demo import load_demo
from votes.reads.cells import load_pair_counts
from votes.reads.filters import VoteFilter
from votes.reads.scans import load_battles
from votes.tables import battle_t, vote_t

IPW = VoteFilter(ipw=True)


def _log_probabilities(engine: Engine) -> None:
    """Pair probabilities as a policy might have logged them: seven levels, 0.01 to 0.13."""
    with engine.begin() as conn:
        conn.execute(update(battle_t).values(pair_probability=0.01 + (battle_t.c.id % 7) * 0.02))


def test_each_vote_weighs_its_inverse_pair_probability_in_cells_and_votes(store: Engine) -> None:
    load_demo(store, n_votes=300, seed=1)
    _log_probabilities(store)
    with store.connect() as conn:
        plain = load_battles(conn)
        probability = np.array(
            conn.execute(
                select(battle_t.c.pair_probability)
                .select_from(vote_t.join(battle_t, vote_t.c.battle_id == battle_t.c.id))
                .order_by(vote_t.c.id)
            )
            .scalars()
            .all(),
            dtype=np.float64,
        )
        weighted = load_battles(conn, filters=IPW)
        counts = load_pair_counts(conn, filters=IPW)
    inverse = 1.0 / probability
    expected = inverse / inverse.mean()
    assert weighted.weight is not None
    np.testing.assert_allclose(weighted.weight, expected, rtol=1e-12)
    want = Battles(
        models=plain.models,
        model_a=plain.model_a,
        model_b=plain.model_b,
        outcome=plain.outcome,
        weight=expected,
    ).counts()
    assert counts.weight_sq is not None and want.weight_sq is not None
    np.testing.assert_array_equal(counts.vote_counts, want.vote_counts)
    np.testing.assert_allclose(counts.count, want.count, rtol=1e-9)
    np.testing.assert_allclose(counts.weight_sq, want.weight_sq, rtol=1e-9)
    assert counts.count.sum() == pytest.approx(counts.n_votes)  # battle counts stay on the votes' scale


def test_votes_without_a_logged_probability_are_refused(store: Engine) -> None:
    load_demo(store, n_votes=100, seed=1)
    with store.connect() as conn, pytest.raises(ValueError, match="100 selected votes have none"):
        load_pair_counts(conn, filters=IPW)


def test_recompute_ipw_is_a_usage_error_without_probabilities_and_recorded_with_them(
    store: Engine, tmp_path: Path
) -> None:
    load_demo(store, n_votes=200, seed=1)
    url = store.url.render_as_string(hide_password=False)
    fit = ["--bootstrap", "0", "--interval", "sandwich", "--no-plots", "--cluster", "none"]
    refused = CliRunner().invoke(
        build_app(), ["recompute", "--database-url", url, "--ipw", *fit, "--out", str(tmp_path / "no")]
    )
    assert refused.exit_code == 2 and "--ipw" in refused.output
    _log_probabilities(store)
    done = CliRunner().invoke(
        build_app(), ["recompute", "--database-url", url, "--ipw", *fit, "--out", str(tmp_path / "yes")]
    )
    assert done.exit_code == 0, done.output
    assert '"ipw": true' in (tmp_path / "yes" / "metadata.json").read_text(encoding="utf-8")
