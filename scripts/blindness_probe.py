"""How often a voter who remembers every reveal knows a side's model before voting, on the real app.

The app runs in-process (FastAPI's TestClient) on a fresh SQLite database whose catalog holds
``--samples`` answers per (prompt, model), every answer a distinct text, under the default rate limits (a
fake clock advances 1.05 s per vote, so the per-minute limits never refuse). The voter fetches a battle,
looks both answers up in its memory of revealed (prompt, answer) -> model, counts the sides it
recognises, votes, and stores the two names the reveal gives. Scenarios: it keeps its cookie; it drops
the cookie every ``--fresh-cookie-every`` votes (a new anonymous annotator, same address); it drops the
cookie and moves to a new network address as often (what Arena does not promise to see through: the
address arrives through a trusted proxy's X-Forwarded-For). Prints the share of sides identified before
voting, over all votes and over the last 50, per scenario, and one JSON line (last).

    python scripts/blindness_probe.py
    python scripts/blindness_probe.py --votes 500 --prompts 100 --models 12 --fresh-cookie-every 55 \\
        --samples 2
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


def _seed(db_url: str, n_prompts: int, n_models: int, n_samples: int = 1) -> None:
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
                    for k in range(n_samples):
                        text = (
                            f"Answer {prompt.id}.{model.id}.{k}: a distinct paragraph on topic {prompt.id}."
                        )
                        session.add(Output(prompt_id=prompt.id, model_id=model.id, sample=k, text=text))
            session.commit()
    finally:
        engine.dispose()


def probe(
    *,
    votes: int,
    n_prompts: int,
    n_models: int,
    fresh_every: int | None,
    n_samples: int = 1,
    fresh_address: bool = False,
) -> dict[str, float | int]:
    """Run one voter; returns the sides identified before voting (all votes, last 50) and votes cast.

    ``fresh_address`` moves the voter to a new address whenever it drops its cookie.
    """
    with tempfile.TemporaryDirectory() as tmp:
        db_url = f"sqlite:///{Path(tmp) / 'probe.db'}"
        _seed(db_url, n_prompts, n_models, n_samples)
        now = [1_700_006_400.0]
        settings = Settings(
            database_url=db_url,
            secret_key=secrets.token_hex(16),
            group_commit_max_wait_ms=1.0,
            trusted_proxies=["192.0.2.10"],  # the in-process client, a reverse proxy here
        )
        app = create_app(settings, clock=lambda: now[0], seed=1)
        memory: dict[tuple[str, str], str] = {}  # (prompt, answer text) -> model named by a reveal
        known: list[int] = []
        with TestClient(app, base_url="http://testserver", client=("192.0.2.10", 50000)) as client:
            client.headers["X-Forwarded-For"] = "198.51.100.1"
            for n in range(votes):
                if fresh_every and n and n % fresh_every == 0:
                    client.cookies.clear()
                    if fresh_address:
                        client.headers["X-Forwarded-For"] = f"203.0.{n // 250 % 250}.{n % 250 + 1}"
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
    parser.add_argument("--samples", type=int, default=1, help="answers per (prompt, model)")
    args = parser.parse_args(argv)
    if min(args.votes, args.prompts, args.fresh_cookie_every, args.samples) < 1 or args.models < 2:
        parser.error("--votes, --prompts, --fresh-cookie-every, --samples >= 1 and --models >= 2")
    every = args.fresh_cookie_every
    results = {}
    for name, fresh, new_address in (
        ("one cookie", None, False),
        (f"fresh cookie every {every}", every, False),
        (f"fresh cookie+address every {every}", every, True),
    ):
        r = probe(
            votes=args.votes,
            n_prompts=args.prompts,
            n_models=args.models,
            fresh_every=fresh,
            n_samples=args.samples,
            fresh_address=new_address,
        )
        results[name] = r
        print(
            f"{name:>34}: {r['identified_share']:6.1%} of sides identified before voting "
            f"({r['identified_share_last_50']:6.1%} in the last 50) over {r['votes']} votes"
        )
    print(
        json.dumps(
            {"prompts": args.prompts, "models": args.models, "samples": args.samples, "results": results}
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
