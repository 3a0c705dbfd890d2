"""An annotator who has had live battles still gets the catalog's new prompts.

A live battle's prompt is the annotator's own, outside the catalog. Counted as a judged prompt of its
pair, it made the pair look judged through: a prompt imported while the site ran never reached that
annotator, on either database.
"""

from __future__ import annotations

import random

from sqlalchemy import insert, select
from sqlalchemy.engine import Engine

from arena.voting.pairing_service import PairingService
from tests.factories import make_settings, seed_catalog
from votes.models import utcnow
from votes.tables import annotator_t, battle_t, model_t, output_t, prompt_t
from votes.voting.live_battles import LIVE_SOURCE


def _prompt_with_answers(conn: object, text: str, models: dict[str, int], *, source: str | None) -> int:
    prompt = conn.execute(  # type: ignore[attr-defined]
        insert(prompt_t).values(text=text, source=source, created_at=utcnow()).returning(prompt_t.c.id)
    ).scalar_one()
    for model_id in models.values():  # answers that do not name their model
        conn.execute(  # type: ignore[attr-defined]
            insert(output_t).values(
                prompt_id=prompt,
                model_id=model_id,
                sample=0,
                text=f"answer {model_id} to {text}",
                created_at=utcnow(),
            )
        )
    return int(prompt)


def test_a_live_battle_leaves_the_catalog_s_new_prompt_to_its_annotator(engine: Engine, db_url: str) -> None:
    seed_catalog(engine, n_prompts=1, models=("alpha-7b", "bravo-13b"))
    with engine.begin() as conn:
        models = {str(n): int(i) for i, n in conn.execute(select(model_t.c.id, model_t.c.name))}
        annotator = conn.execute(
            insert(annotator_t).values(created_at=utcnow()).returning(annotator_t.c.id)
        ).scalar_one()
    service = PairingService(engine, make_settings(db_url, pairing_policy="uniform"), rng=random.Random(5))
    service.refresh(force=True)
    service.prepare(annotator)
    first = service.pick(annotator)
    assert first is not None  # the catalog's one prompt, now issued to this annotator
    with engine.begin() as conn:  # a live battle of the same pair, on the annotator's own prompt
        own = _prompt_with_answers(conn, "my own question", models, source=LIVE_SOURCE)
        conn.execute(
            insert(battle_t).values(
                prompt_id=own, model_a_id=models["alpha-7b"], model_b_id=models["bravo-13b"],
                annotator_id=annotator, source=LIVE_SOURCE, issued_at=utcnow(),
            )
        )  # fmt: skip
        new = _prompt_with_answers(conn, "imported while the site serves", models, source=None)
    service.refresh(force=True)
    service.prepare(annotator)
    after = service.pick(annotator)
    assert after is not None and after.prompt_id == new
