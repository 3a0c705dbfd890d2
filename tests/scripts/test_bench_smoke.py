"""Tiny runs of the benchmark scripts, so they cannot rot: each must finish and print sane figures.

The scripts run as the user would run them (a subprocess of this interpreter) and the test reads the JSON
line they end with. Peers from the optional ``bench`` extra are included when importable; the script must
then name the missing ones in ``skipped``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.script_modules import load_script
from votes.files.records import InputError

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
OPTIONAL_PEERS = {"evalica": "evalica", "choix": "choix"}


def _run(script: str, *args: str, timeout: float = 240) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, str(SCRIPTS / script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:] + proc.stdout[-2000:]
    last = proc.stdout.strip().splitlines()[-1]
    figures: dict[str, Any] = json.loads(last)
    return figures


def test_bench_fit_small_run_reports_every_contender() -> None:
    contenders = "ours,evalica,choix,lmsys-current,lmsys-classic"
    fig = _run(
        "bench_fit.py",
        *("--votes", "5000", "--models", "10", "--rounds", "5", "--contenders", contenders),
        *("--budget", "60", "--extrapolate-seconds", "5"),
    )
    for key in (
        "votes",
        "models",
        "rounds",
        "ours_s",
        "fastest_peer",
        "fastest_peer_s",
        "speedup_vs_fastest_peer",
        "max_rating_diff",
    ):
        assert key in fig, key
    assert (fig["votes"], fig["models"], fig["rounds"]) == (5000, 10, 5)
    assert fig["ours_s"] > 0
    # Ours is the exact MLE (Newton-polished); the reference is too.
    assert fig["max_rating_diff"] < 0.01
    assert fig["fastest_peer"] in ("evalica", "lmsys-current", "lmsys-classic")
    assert fig["fastest_peer_s"] > 0
    assert fig["speedup_vs_fastest_peer"] == pytest.approx(fig["fastest_peer_s"] / fig["ours_s"])
    for peer, module in OPTIONAL_PEERS.items():
        if importlib.util.find_spec(module) is None:
            assert peer in fig["skipped"]
        else:
            assert peer not in fig["skipped"]
            # Every peer fits the same plain Bradley-Terry model; all land within an Elo of the MLE.
            assert fig["max_rating_diff_peers"][peer] < 1.0
    assert fig["max_rating_diff_peers"]["lmsys-classic"] < 1.0


@pytest.mark.slow
def test_bench_fit_arena_rank_small_run() -> None:
    pytest.importorskip("arena_rank")
    fig = _run(
        "bench_fit.py",
        *("--votes", "5000", "--models", "10", "--rounds", "4", "--contenders", "ours,arena-rank"),
        *("--budget", "5", "--extrapolate-seconds", "5"),
        timeout=600,
    )
    assert fig["fastest_peer"] == "arena-rank"
    assert fig["max_rating_diff_peers"]["arena-rank"] < 1.0


def test_reference_mle_agrees_with_fit_bt() -> None:
    """The benchmark's own Newton reference and the leaderboard's fit are the same estimate."""
    bench = load_script("bench_fit")
    from leaderboard import fit_bt

    battles = bench.synthetic_battles(3000, 6, random_state=3)
    counts = battles.counts()
    ref = bench.exact_mle(counts)
    ours = np.asarray(fit_bt(counts).rating)
    np.testing.assert_allclose(ref - ref.mean(), ours - ours.mean(), atol=1e-6)


def test_synthetic_battles_look_like_an_arena() -> None:
    common = load_script("_bench_common")
    battles = common.synthetic_battles(200_000, 30, random_state=1)
    share = np.bincount(battles.outcome, minlength=4) / battles.n_votes
    assert 0.12 < share[2] + share[3] < 0.19  # about 15% ties
    assert 0 < share[3] < share[2] + share[3]  # some of them both bad
    assert share[0] > share[1]  # a small left-side advantage
    pairs = np.bincount(battles.model_a * 30 + battles.model_b)
    assert pairs.max() > 20 * np.median(pairs[pairs > 0])  # skewed pair frequencies
    again = common.synthetic_battles(200_000, 30, random_state=1)
    np.testing.assert_array_equal(battles.outcome, again.outcome)


def test_bench_scale_small_run_on_sqlite() -> None:
    fig = _run("bench_scale.py", "--votes", "3000", "--models", "8")
    assert fig["backend"] == "sqlite"
    assert fig["votes"] == 3000
    assert fig["cells_agree"] is True
    assert fig["errors"] == {}
    for key in (
        "groupby_s",
        "rows_s",
        "elo_replay_s",
        "groupby_peak_mb",
        "rows_peak_mb",
        "sha256_s",
        "ledger_s",
    ):
        assert fig[key] > 0, key


def test_bench_import_prints_time_and_peak_memory_side_by_side(tmp_path: Path) -> None:
    fig = _run("bench_import.py", "--sizes", "2000,6000", "--workdir", str(tmp_path))
    assert fig["battles"] == [2000, 6000]
    assert fig["backend"] == "sqlite"
    assert all(s > 0 for s in fig["import_s"]) and all(mb > 0 for mb in fig["import_peak_mb"])


def test_bench_import_measures_write_waits_during_an_import(tmp_path: Path) -> None:
    fig = _run("bench_import.py", "--write-waits", "3000", "--workdir", str(tmp_path))
    assert fig["battles"] == 3000 and fig["writes"] >= 1
    assert 0 <= fig["p99_wait_s"] <= fig["max_wait_s"]


def test_bench_votes_short_run_on_sqlite() -> None:
    fig = _run(
        "bench_votes.py",
        "--backend",
        "sqlite",
        "--seconds",
        "2",
        "--clients",
        "2",
        "--ramp",
        "0.5",
        timeout=300,
    )
    for key in ("backend", "votes_per_s", "p50_ms", "p99_ms", "errors"):
        assert key in fig, key
    assert fig["backend"] == "sqlite"
    assert fig["votes"] > 0 and fig["votes_per_s"] > 0
    assert 0 < fig["p50_ms"] <= fig["p99_ms"]
    assert fig["errors"] == 0
    assert fig["votes_missing"] == 0
    assert fig["loadgen_cpu_s"] > 0
    # One worker writing its own votes: one worker's CPU, no writer process, no database server.
    assert fig["workers"] == 1 and fig["writer"] == "inline"
    assert len(fig["worker_cpu_shares"]) == 1 and fig["worker_cpu_shares"][0] > 0
    assert fig["writer_cpu_share"] == 0 and fig["database_cpu_share"] == 0


def test_loadgen_percentile_is_nearest_rank() -> None:
    loadgen = load_script("loadgen")
    values = [float(v) for v in range(1, 101)]
    assert loadgen.percentile(values, 50) == 50.0
    assert loadgen.percentile(values, 99) == 99.0
    assert loadgen.percentile(values, 100) == 100.0
    assert loadgen.percentile([], 50) is None


def test_bench_battles_file_goes_through_the_package_reader(tmp_path: Path) -> None:
    common = load_script("_bench_common")
    rows = [
        {"model_a": "x", "model_b": "y", "winner": "model_a"},
        {"model_a": "y", "model_b": "z", "winner": "tie (bothbad)"},
    ]
    path = tmp_path / "battles.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    battles = common.load_battles_file(path)
    assert battles.models == ("x", "y", "z")
    assert battles.model_a.tolist() == [0, 1] and battles.model_b.tolist() == [1, 2]
    assert battles.outcome.tolist() == [0, 3]
    # A self-battle is refused, as `arena import` refuses it, instead of being dropped without a word.
    path.write_text(json.dumps({"model_a": "x", "model_b": "x", "winner": "tie"}) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match="cannot battle itself"):
        common.load_battles_file(path)


def test_bench_pairing_quick_prints_savings_per_setting_and_target() -> None:
    figures = _run("bench_pairing.py", "--quick", "--policies", "uniform,width-greedy")
    assert figures["policy"] == "width-greedy"
    saved = figures["votes_saved_vs_uniform"]
    assert set(saved) == {"fixed", "arrivals"}
    for setting in saved.values():
        assert set(setting) == {"width", "tau", "separation"}
        assert all(-5.0 < v < 1.0 for v in setting.values())
    # New models arriving: the model-based policy must beat uniform on the interval width.
    assert saved["arrivals"]["width"] > 0.1
    # The new models catch up faster than under uniform, and no incumbent is left without votes.
    assert figures["new_models"]["votes_saved"] > 0.1
    assert 0.0 < figures["new_models"]["min_old_share"] < 1.0


@pytest.fixture(scope="session")
def bench_pycache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One bytecode cache for the end-to-end benchmark's runs in this test session (shared by the xdist
    workers: CPython writes each ``.pyc`` atomically), so the installed packages are compiled once, not
    in every run's own work folder."""
    base = tmp_path_factory.getbasetemp()
    return (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "bench-pycache"


def test_bench_end_to_end_small_run(tmp_path: Path, bench_pycache: Path) -> None:
    fig = _run(
        "bench_end_to_end.py",
        *("--votes", "3000", "--models", "8", "--rounds", "5", "--workdir", str(tmp_path)),
        *("--pycache", str(bench_pycache), "--ten-million-store"),
        *("--peers", "lmsys-current", "--budget", "30", "--extrapolate-seconds", "2"),
        timeout=600,
    )
    keys = ("recompute_1m_s", "recompute_1m_peak_mb", "import_1m_s", "import_1m_peak_mb", "publish_1m_s")
    for key in (*keys, "import_10m_s", "import_10m_peak_mb", "publish_10m_s", "publish_10m_peak_mb"):
        assert fig[key] is not None and fig[key] > 0, key
    assert not list(tmp_path.glob("votes10-*"))  # the 10x store is deleted after its publish
    assert len(list((tmp_path / "snap10-this").iterdir())) == 1
    assert fig["cli_start_s"] > 0 and fig["peer_lmsys_current_s"] > 0
    assert fig["recompute_10m_s"] is None  # only with --ten-million
    assert fig["import_pg_1m_s"] is None  # only with --postgres-url
    assert (fig["votes"], fig["models"], fig["rounds"]) == (3000, 8, 5)


@pytest.mark.postgres
def test_bench_end_to_end_imports_into_postgres_beside_sqlite(
    tmp_path: Path, pg_url: str, bench_pycache: Path
) -> None:
    """``--postgres-url`` times the import into a new database of that server next to SQLite's, and
    drops that database again."""
    from sqlalchemy import create_engine, text

    def scratch_databases() -> set[str]:
        engine = create_engine(pg_url)
        try:
            with engine.connect() as conn:
                query = text("SELECT datname FROM pg_database WHERE datname LIKE 'arena_bench_e2e%'")
                return {str(name) for name in conn.scalars(query)}
        finally:
            engine.dispose()

    before = scratch_databases()
    fig = _run(
        "bench_end_to_end.py",
        *("--votes", "3000", "--models", "8", "--rounds", "5", "--workdir", str(tmp_path)),
        *("--skip", "recompute,publish,peers", "--postgres-url", pg_url, "--pycache", str(bench_pycache)),
        timeout=600,
    )
    assert fig["import_pg_1m_s"] > 0 and fig["import_pg_1m_peak_mb"] > 0
    assert fig["import_1m_s"] > 0
    # a scratch database named for a process still running is another benchmark's (another test run on
    # the same server), not one this run left behind
    left = {name for name in scratch_databases() - before if not Path(f"/proc/{name.split('_')[3]}").exists()}
    assert left == set()


def test_bench_rater_ability_small_run_compares_both_fits() -> None:
    fig = _run("bench_rater_ability.py", "--votes", "6000", "--models", "8", "--annotators", "30")
    assert (fig["votes"], fig["models"], fig["annotators"]) == (6000, 8, 30)
    assert fig["davidson_position_s"] > 0 and fig["rater_ability_s"] > 0
    assert fig["ratio"] == pytest.approx(fig["rater_ability_s"] / fig["davidson_position_s"], rel=1e-9)
    assert fig["log_discrimination_corr"] > 0.3  # spread 0.4 over 200 votes each: clearly followed
    assert 0 < fig["test_log_loss_rater_ability"] < 1.2 and 0 < fig["test_log_loss_davidson_position"] < 1.2


def test_bench_votes_compares_with_another_checkout() -> None:
    """``--compare DIR`` runs the other code too, on its own database, and reports this tree's ratios
    (here DIR is this checkout itself, so both sides run the same code)."""
    root = str(Path(__file__).resolve().parents[2])
    fig = _run(
        "bench_votes.py",
        "--backend",
        "sqlite",
        "--seconds",
        "2",
        "--clients",
        "2",
        "--ramp",
        "0.5",
        "--compare",
        root,
        timeout=400,
    )
    assert [c["tree"] for c in fig["configs"]] == ["this", root]
    assert all(c["votes"] > 0 and c["votes_missing"] == 0 for c in fig["configs"])
    ((label, ratio),) = fig["compare_ratio"].items()
    assert label == "sqlite/inline/metrics default"
    assert ratio["votes_per_s"] > 0 and ratio["cpu_per_vote"] > 0


def test_bench_pairing_votes_read_each_pairs_own_stream_whatever_the_order() -> None:
    bench = load_script("bench_pairing")
    design = bench.PairDesign.of(4)
    truth = np.array([50.0, 0.0, -20.0, -80.0])
    first = bench.Board(design, truth, 0.3, 15.0, stream_seed=5)
    second = bench.Board(design, truth, 0.3, 15.0, stream_seed=5)
    # The same votes per pair asked in another order and other batches (past one block of draws).
    for pairs in ([0, 0, 3] * 30, [5] * 70, [3, 0]):
        first.vote(np.array(pairs, dtype=np.int64))
    for pairs in ([3, 5, 0] * 31, [5] * 39 + [0] * 30):
        second.vote(np.array(pairs, dtype=np.int64))
    np.testing.assert_array_equal(first.n, second.n)
    np.testing.assert_array_equal(first.s, second.s)
    assert 0.0 < first.s[5] < first.n[5]  # real outcomes, not all one side


def test_bench_digest_counts_prints_time_and_peak_memory_beside_another_checkout() -> None:
    root = SCRIPTS.parent
    fig = _run("bench_digest_counts.py", "--rows", "60000", "--batch", "7000", "--compare", str(root))
    assert fig["rows"] == 60_000 and fig["batch"] == 7_000
    for key in ("seconds", "peak_mb", "compare_seconds", "compare_peak_mb"):
        assert fig[key] > 0, key
