"""Pairing keeps answers blind across reveals: an answer whose model a vote already named to the annotator
is not shown to them again while a battle of answers they have not seen revealed is left."""

from __future__ import annotations

import random
from typing import Any

from arena.voting.pairing import PairingCatalog, choose_battle
from votes.voting.battles import CatalogRow


def _catalog(n_prompts: int, models: tuple[int, ...]) -> PairingCatalog:
    return PairingCatalog.from_rows(
        [
            CatalogRow(prompt_id=p, output_id=p * 100 + m, model_id=m)
            for p in range(1, n_prompts + 1)
            for m in models
        ]
    )


def test_choose_battle_avoids_revealed_answers_while_fresh_ones_remain() -> None:
    catalog = _catalog(3, (1, 2, 3, 4))
    for seed in range(40):
        rng = random.Random(seed)
        seen: set[tuple[int, int, int]] = set()
        revealed: set[int] = set()
        for _ in range(6):  # 12 answers, two fresh ones per battle: exactly six fresh battles
            choice = choose_battle(
                catalog, policy="uniform", counts={}, seen=seen, rng=rng, revealed=revealed
            )
            assert choice is not None
            shown = {choice.output_a.output_id, choice.output_b.output_id}
            assert not shown & revealed, (seed, shown, revealed)
            revealed |= shown
            a, b = choice.output_a.model_id, choice.output_b.model_id
            seen.add((choice.prompt_id, min(a, b), max(a, b)))
        assert len(revealed) == 12
        # Every answer was revealed; unjudged battles remain, so one is still offered.
        late = choose_battle(catalog, policy="uniform", counts={}, seen=seen, rng=rng, revealed=revealed)
        assert (
            late is not None
            and (late.prompt_id, *sorted((late.output_a.model_id, late.output_b.model_id))) not in seen
        )


def test_a_remembered_exhausted_set_changes_no_choice_and_skips_the_scans() -> None:
    """The caller's memory of exhausted pairs gives the same guarantees as the scan it spares: no revealed
    answer while a fresh battle exists, a battle (revealed) when none is left, and every pair it learned
    really has no fresh prompt."""
    catalog = _catalog(3, (1, 2, 3, 4))
    for seed in range(40):
        rng = random.Random(seed)
        seen: set[tuple[int, int, int]] = set()
        revealed: set[int] = set()
        exhausted: set[tuple[int, int]] = set()
        for _ in range(6):
            choice = choose_battle(
                catalog,
                policy="uniform",
                counts={},
                seen=seen,
                rng=rng,
                revealed=revealed,
                exhausted=exhausted,
            )
            assert choice is not None
            shown = {choice.output_a.output_id, choice.output_b.output_id}
            assert not shown & revealed, (seed, shown, revealed)
            revealed |= shown
            a, b = choice.output_a.model_id, choice.output_b.model_id
            seen.add((choice.prompt_id, min(a, b), max(a, b)))
            for lo, hi in exhausted:  # what it learned holds
                assert all(
                    (p, lo, hi) in seen or {p * 100 + lo, p * 100 + hi} & revealed
                    for p in catalog.shared[(lo, hi)]
                )
        late = choose_battle(
            catalog, policy="uniform", counts={}, seen=seen, rng=rng, revealed=revealed, exhausted=exhausted
        )
        assert late is not None
        assert (late.prompt_id, *sorted((late.output_a.model_id, late.output_b.model_id))) not in seen
        unjudged = {
            pair for pair, prompts in catalog.shared.items() if any((p, *pair) not in seen for p in prompts)
        }
        assert exhausted >= unjudged, "with every answer revealed, every pair left to judge is exhausted"


def test_without_reveals_every_pair_stays_reachable() -> None:
    catalog = _catalog(2, (1, 2, 3))
    rng = random.Random(0)
    pairs = set()
    for _ in range(200):
        choice = choose_battle(catalog, policy="uniform", counts={}, seen=set(), rng=rng, revealed=set())
        assert choice is not None
        pairs.add(tuple(sorted((choice.output_a.model_id, choice.output_b.model_id))))
    assert pairs == {(1, 2), (1, 3), (2, 3)}


def test_the_site_never_shows_a_revealed_answer_while_a_fresh_battle_exists(make_client: Any) -> None:
    """The seeded catalog: 6 prompts answered by 4 models, 24 answers; each vote reveals two, so twelve
    votes can all be on answers never seen revealed, and the thirteenth is still offered."""
    client = make_client()
    revealed: set[tuple[str, str]] = set()
    for n in range(13):
        battle = client.get("/api/battles/next")
        assert battle.status_code == 200, battle.text
        body = battle.json()
        vote = client.post(
            "/api/votes",
            json={"token": body["token"], "winner": "model_a"},
            headers={"X-CSRF-Token": body["csrf_token"]},
        )
        assert vote.status_code == 200, vote.text
        named = vote.json()
        prompt = body["prompt"]["text"]
        shown = {(prompt, named["model_a"]), (prompt, named["model_b"])}
        if n < 12:
            assert not shown & revealed, (n, shown)
        else:
            assert shown <= revealed  # nothing fresh is left; pairing goes on with judged-free battles
        revealed |= shown
    assert len(revealed) == 24


def test_a_battle_draws_a_sample_whose_model_was_not_revealed() -> None:
    # One prompt, two models, three samples each (output id = model * 10 + sample).
    rows = [CatalogRow(prompt_id=1, output_id=m * 10 + k, model_id=m) for m in (1, 2) for k in range(3)]
    catalog = PairingCatalog.from_rows(rows)
    assert catalog.outputs[1] == {1: (10, 11, 12), 2: (20, 21, 22)}
    drawn: set[int] = set()
    for seed in range(60):
        choice = choose_battle(
            catalog, policy="uniform", counts={}, seen=set(), rng=random.Random(seed), revealed={10, 11, 20}
        )
        assert choice is not None
        drawn |= {choice.output_a.output_id, choice.output_b.output_id}
    assert drawn == {12, 21, 22}  # every unrevealed sample, never a revealed one
    # With every sample of a model revealed, the battle is still offered (the fallback), from all samples.
    late = choose_battle(
        catalog, policy="uniform", counts={}, seen=set(), rng=random.Random(0), revealed={10, 11, 12}
    )
    assert late is not None and {late.output_a.model_id, late.output_b.model_id} == {1, 2}
