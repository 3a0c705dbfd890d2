"""How often a voter who remembers every reveal knows a side's model before voting, on the real app.

The app runs in-process (FastAPI's TestClient) on a fresh SQLite database whose catalog holds one answer
per (prompt, model), every answer a distinct text, under the default rate limits (a fake clock advances
1.05 s per vote, so the per-minute limits never refuse). The voter fetches a battle, looks both answers
up in its memory of revealed (prompt, answer) -> model, counts the sides it recognises, votes, and stores
the two names the reveal gives. With ``--fresh-cookie-every N`` it drops its cookie every N votes (a new
anonymous annotator each time) while keeping its memory. Prints the share of sides identified before
voting, over all votes and over the last 50, per scenario, and one JSON line.

    python scripts/blindness_probe.py
    python scripts/blindness_probe.py --votes 500 --prompts 100 --models 12 --fresh-cookie-every 55
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
import tempfile
from pathlib import Path

from fastapi.testclient import TestClient
from sqlmodel import Session

from arena.app import create_app
from arena.settings import Settings
from votes.db import make_engine
from votes.migrate import upgrade_database
from votes.models import Model, Output, Prompt


def _seed(db_url: str, n_prompts: int, n_models: int) -> None:
    upgrade_database(db_url)
    engine = make_engine(db_url)
    try:
        with Session(engine) as session:
            models = [Model(name=f"model-{m:02d}", organisation=f"org-{m:02d}") for m in range(n_models)]
            prompts = [
                Prompt(text=f"Question {p}: describe topic {p}.", category="probe") for p in range(n_prompts)
            ]
            session.add_all([*models, *prompts])
            session.flush()
            for prompt in prompts:
                for model in models:
                    assert prompt.id is not None and model.id is not None
                    text = f"Answer {prompt.id}.{model.id}: a distinct paragraph about topic {prompt.id}."
                    session.add(Output(prompt_id=prompt.id, model_id=model.id, text=text))
            session.commit()
    finally:
        engine.dispose()


def probe(*, votes: int, n_prompts: int, n_models: int, fresh_every: int | None) -> dict[str, float | int]:
    """Run one voter; returns the sides identified before voting (all votes, last 50) and votes cast."""
    with tempfile.TemporaryDirectory() as tmp:
        db_url = f"sqlite:///{Path(tmp) / 'probe.db'}"
        _seed(db_url, n_prompts, n_models)
        now = [1_700_006_400.0]
        settings = Settings(
            database_url=db_url, secret_key=secrets.token_hex(16), group_commit_max_wait_ms=1.0
        )
        app = create_app(settings, clock=lambda: now[0], seed=1)
        memory: dict[tuple[str, str], str] = {}  # (prompt, answer text) -> model named by a reveal
        known: list[int] = []
        with TestClient(app, base_url="http://testserver") as client:
            for n in range(votes):
                if fresh_every and n and n % fresh_every == 0:
                    client.cookies.clear()
                now[0] += 1.05
                battle = client.get("/api/battles/next")
                if battle.status_code != 200:
                    raise SystemExit(f"battle {n}: HTTP {battle.status_code}: {battle.text[:200]}")
                body = battle.json()
                prompt, a, b = body["prompt"]["text"], body["a"]["text"], body["b"]["text"]
                known.append(((prompt, a) in memory) + ((prompt, b) in memory))
                vote = client.post(
                    "/api/votes",
                    json={"token": body["token"], "winner": "model_a"},
                    headers={"X-CSRF-Token": body["csrf_token"]},
                )
                if vote.status_code != 200:
                    raise SystemExit(f"vote {n}: HTTP {vote.status_code}: {vote.text[:200]}")
                named = vote.json()
                memory[(prompt, a)] = named["model_a"]
                memory[(prompt, b)] = named["model_b"]
        tail = known[-50:]
        return {
            "votes": len(known),
            "identified_share": sum(known) / (2 * len(known)),
            "identified_share_last_50": sum(tail) / (2 * len(tail)),
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--votes", type=int, default=500)
    parser.add_argument("--prompts", type=int, default=100)
    parser.add_argument("--models", type=int, default=12)
    parser.add_argument("--fresh-cookie-every", type=int, default=55)
    args = parser.parse_args(argv)
    if args.votes < 1 or args.prompts < 1 or args.models < 2 or args.fresh_cookie_every < 1:
        parser.error("--votes, --prompts, --fresh-cookie-every >= 1 and --models >= 2")
    results = {}
    for name, every in (
        ("one cookie", None),
        (f"fresh cookie every {args.fresh_cookie_every}", args.fresh_cookie_every),
    ):
        r = probe(votes=args.votes, n_prompts=args.prompts, n_models=args.models, fresh_every=every)
        results[name] = r
        print(
            f"{name:>26}: {r['identified_share']:6.1%} of sides identified before voting "
            f"({r['identified_share_last_50']:6.1%} in the last 50) over {r['votes']} votes"
        )
    print(json.dumps({"prompts": args.prompts, "models": args.models, "results": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
