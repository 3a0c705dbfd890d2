"""A short run of scripts/blindness_probe.py, so it cannot rot: a voter who keeps its cookie never sees
an answer it saw revealed while fresh ones remain; one who drops it does."""

from __future__ import annotations

from tests.script_modules import load_script


def test_probe_one_cookie_stays_blind_fresh_cookies_do_not() -> None:
    probe = load_script("blindness_probe").probe
    # 8 prompts x 4 models = 32 answers: 16 votes can all be on answers never revealed.
    kept = probe(votes=16, n_prompts=8, n_models=4, fresh_every=None)
    assert kept["votes"] == 16 and kept["identified_share"] == 0.0
    dropped = probe(votes=16, n_prompts=8, n_models=4, fresh_every=2)
    assert dropped["votes"] == 16 and dropped["identified_share"] > 0.0
