"""A short run of scripts/blindness_probe.py, so it cannot rot: a voter who keeps its cookie, or drops it
but stays at its address, never sees an answer it saw revealed while fresh ones remain; one who also
moves to a new address does (what blindness does not promise), and several samples per (prompt, model)
keep even that voter blind longer."""

from __future__ import annotations

from tests.script_modules import load_script


def test_probe_stays_blind_across_cookies_from_one_address() -> None:
    probe = load_script("blindness_probe").probe
    # 8 prompts x 4 models = 32 answers: 16 votes can all be on answers never revealed.
    kept = probe(votes=16, n_prompts=8, n_models=4, fresh_every=None)
    assert kept["votes"] == 16 and kept["identified_share"] == 0.0
    dropped = probe(votes=16, n_prompts=8, n_models=4, fresh_every=2)
    assert dropped["votes"] == 16 and dropped["identified_share"] == 0.0
    moved = probe(votes=16, n_prompts=8, n_models=4, fresh_every=2, fresh_address=True)
    assert moved["votes"] == 16 and moved["identified_share"] > 0.0


def test_probe_draws_unrevealed_samples_when_answers_outnumber_reveals() -> None:
    probe = load_script("blindness_probe").probe
    # 4 prompts x 3 models x 4 samples = 48 answers; 6 votes judge every (prompt, pair) once and reveal 12.
    r = probe(votes=12, n_prompts=4, n_models=3, fresh_every=None, n_samples=4)
    assert r["votes"] == 12 and r["identified_share"] == 0.0
    single = probe(votes=12, n_prompts=4, n_models=3, fresh_every=None, n_samples=1)
    assert single["votes"] == 12 and single["identified_share"] > 0.0
