"""Gold and repeat battles are blind in real headless Chromium: a gold battle's (or a repeat's: an own
earlier battle again, sides swapped) page and API answer have the same structure, attributes, headers and
token form as a live battle's, and so has the reveal after its vote; only the texts differ."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, SQLModel

from arena.app import create_app
from arena.voting.checks import REPEAT_GAP
from tests.e2e.conftest import serve
from tests.factories import make_settings, seed_catalog, write_jsonl
from votes.db import make_engine
from votes.voting.gold_items import add_gold_file

pytestmark = pytest.mark.e2e

# The page's element tree as tag, attributes and children, with every text and the content of the prompt
# and the answers (Markdown of whatever the texts are) left out; the token's value is replaced by its form.
_SKELETON_JS = """
() => {
  const walk = (node) => {
    const attrs = {};
    for (const a of node.attributes) {
      attrs[a.name] = (a.name === 'value' && node.name === 'token') ? 'TOKEN' : a.value;
    }
    const opaque = node.classList.contains('md') || node.classList.contains('answer-body');
    const kids = opaque ? [] : Array.from(node.children).map(walk);
    return [node.tagName, attrs, kids];
  };
  return JSON.stringify(walk(document.querySelector('#battle-area')));
}
"""
_TOKEN = re.compile(r"^[A-Za-z0-9_=-]+$")


@pytest.fixture
def site(tmp_path: Path) -> Iterator[tuple[str, Engine]]:
    url = f"sqlite:///{tmp_path}/gold.db"
    engine = make_engine(url)
    SQLModel.metadata.create_all(engine)
    seed_catalog(engine)
    rows = [
        {
            "kind": "objective",
            "prompt": f"Gold question {i}: explain **topic {i}**.",
            "right": f"Right answer {i}.",
            "wrong": f"Wrong answer {i}.",
            "category": "generic",
        }
        for i in range(4)
    ]
    with Session(engine) as session:
        add_gold_file(session, write_jsonl(tmp_path / "golds.jsonl", rows))
        session.commit()
    # The onboarding quiz of one gold: each new visitor's first battle is a gold, the second a live one.
    app = create_app(make_settings(url, gold_rate=0.0, gold_quiz=1), engine=engine, seed=4)
    try:
        with serve(app) as base:
            yield base, engine
    finally:
        engine.dispose()


def _shape(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shape(v) for v in value[:1]]
    return type(value).__name__


def test_a_gold_page_and_a_live_page_have_the_same_skeleton(site: tuple[str, Engine], browser: Any) -> None:
    base, _engine = site
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    page.goto(f"{base}/vote")
    gold_prompt = page.locator(".prompt .md").inner_text()
    assert gold_prompt.startswith("Gold question")
    gold = page.evaluate(_SKELETON_JS.replace("node.name", "node.getAttribute('name')"))
    page.locator("button[value='model_a']").click()
    page.wait_for_url(re.compile(r"/battles/\d+$"))
    assert gold_prompt in (page.locator(".prompt .md").first.text_content() or "")  # the reveal shows it
    page.goto(f"{base}/vote")
    assert not page.locator(".prompt .md").inner_text().startswith("Gold question")
    live = page.evaluate(_SKELETON_JS.replace("node.name", "node.getAttribute('name')"))
    context.close()
    assert gold == live


def test_a_gold_and_a_live_api_answer_cannot_be_told_apart(site: tuple[str, Engine], browser: Any) -> None:
    base, _engine = site
    context = browser.new_context()
    first = context.request.get(f"{base}/api/battles/next")
    gold = first.json()
    assert gold["prompt"]["text"].startswith("Gold question")
    vote = context.request.post(
        f"{base}/api/votes",
        data={"token": gold["token"], "winner": "model_b"},
        headers={"X-CSRF-Token": gold["csrf_token"]},
    )
    assert vote.ok, vote.text()
    revealed = vote.json()
    second = context.request.get(f"{base}/api/battles/next")
    live = second.json()
    assert not live["prompt"]["text"].startswith("Gold question")
    live_vote = context.request.post(
        f"{base}/api/votes",
        data={"token": live["token"], "winner": "model_b"},
        headers={"X-CSRF-Token": live["csrf_token"]},
    )
    assert live_vote.ok, live_vote.text()
    live_revealed = live_vote.json()
    context.close()
    # after the vote: the same answer, ids from one numbering, a rating change as a live vote shows
    assert _shape(revealed) == _shape(live_revealed)
    assert revealed["vote_id"] < live_revealed["vote_id"]
    assert revealed["battle_id"] < live_revealed["battle_id"]
    assert revealed["ratings"]["model_b"]["change"] > 0 > revealed["ratings"]["model_a"]["change"]
    assert _shape(gold) == _shape(live)
    assert gold["prompt"]["category"] == live["prompt"]["category"]
    assert gold["expires_in"] == live["expires_in"]
    assert _TOKEN.match(gold["token"]) and _TOKEN.match(live["token"])
    assert abs(len(gold["token"]) - len(live["token"])) <= 64
    ignored = {"date", "content-length", "x-request-id", "set-cookie"}
    assert {k for k in first.headers if k not in ignored} == {k for k in second.headers if k not in ignored}
    assert revealed["model_a"] != revealed["model_b"]  # a file's gold names two different catalog models


@pytest.fixture
def repeat_site(tmp_path: Path) -> Iterator[tuple[str, Engine]]:
    """A site where every battle that can repeat does (a rate above the setting's bound, for the test),
    with room for 30 battles free of revealed answers, and no golds."""
    url = f"sqlite:///{tmp_path}/repeat.db"
    engine = make_engine(url)
    SQLModel.metadata.create_all(engine)
    seed_catalog(engine, n_prompts=40)
    settings = make_settings(url, gold_rate=0.0).model_copy(update={"repeat_rate": 1.0})
    app = create_app(settings, engine=engine, seed=4)
    try:
        with serve(app) as base:
            yield base, engine
    finally:
        engine.dispose()


def _vote_until_a_repeat_is_due(context: Any, base: str) -> list[str]:
    """REPEAT_GAP votes through the API of this browser context (its cookies): the prompts voted on."""
    prompts = []
    for _ in range(REPEAT_GAP):
        battle = context.request.get(f"{base}/api/battles/next").json()
        prompts.append(battle["prompt"]["text"])
        vote = context.request.post(
            f"{base}/api/votes",
            data={"token": battle["token"], "winner": "model_a"},
            headers={"X-CSRF-Token": battle["csrf_token"]},
        )
        assert vote.ok, vote.text()
    return prompts


def test_a_repeat_page_and_a_live_page_have_the_same_skeleton(
    repeat_site: tuple[str, Engine], browser: Any
) -> None:
    base, _engine = repeat_site
    context = browser.new_context(java_script_enabled=False)
    prompts = _vote_until_a_repeat_is_due(context, base)
    page = context.new_page()
    page.goto(f"{base}/vote")
    first = prompts[0].split(":")[0] + ":"  # "Question <n>:", the rest is rendered Markdown
    assert page.locator(".prompt .md").inner_text().startswith(first)  # the first battle, again
    repeat = page.evaluate(_SKELETON_JS.replace("node.name", "node.getAttribute('name')"))
    page.locator("button[value='model_b']").click()
    page.wait_for_url(re.compile(r"/battles/\d+$"))
    revealed = page.evaluate(_SKELETON_JS.replace("node.name", "node.getAttribute('name')"))
    page.goto(f"{base}/vote")  # the only vote old enough was repeated: a live battle
    live = page.evaluate(_SKELETON_JS.replace("node.name", "node.getAttribute('name')"))
    page.locator("button[value='model_b']").click()
    page.wait_for_url(re.compile(r"/battles/\d+$"))
    revealed_live = page.evaluate(_SKELETON_JS.replace("node.name", "node.getAttribute('name')"))
    context.close()
    assert repeat == live
    # the reveal counts the annotator's votes, the repeat's too (a count that stood still would tell)
    assert '"data-votes":"21"' in revealed and '"data-votes":"22"' in revealed_live
    assert revealed == revealed_live.replace('"data-votes":"22"', '"data-votes":"21"')


def test_a_repeat_and_a_live_api_answer_cannot_be_told_apart(
    repeat_site: tuple[str, Engine], browser: Any
) -> None:
    base, _engine = repeat_site
    context = browser.new_context()
    prompts = _vote_until_a_repeat_is_due(context, base)
    first = context.request.get(f"{base}/api/battles/next")
    repeat = first.json()
    assert repeat["prompt"]["text"] == prompts[0]
    vote = context.request.post(
        f"{base}/api/votes",
        data={"token": repeat["token"], "winner": "model_b"},
        headers={"X-CSRF-Token": repeat["csrf_token"]},
    )
    assert vote.ok, vote.text()
    second = context.request.get(f"{base}/api/battles/next")
    live = second.json()
    assert live["prompt"]["text"] not in prompts
    live_vote = context.request.post(
        f"{base}/api/votes",
        data={"token": live["token"], "winner": "model_b"},
        headers={"X-CSRF-Token": live["csrf_token"]},
    )
    assert live_vote.ok, live_vote.text()
    ignored = {"date", "content-length", "x-request-id", "set-cookie"}
    assert {k for k in first.headers if k not in ignored} == {k for k in second.headers if k not in ignored}
    assert {k for k in vote.headers if k not in ignored} == {k for k in live_vote.headers if k not in ignored}
    shown, shown_live = vote.json(), live_vote.json()
    context.close()
    assert _shape(repeat) == _shape(live) and repeat["expires_in"] == live["expires_in"]
    assert _TOKEN.match(repeat["token"]) and abs(len(repeat["token"]) - len(live["token"])) <= 64
    assert _shape(shown) == _shape(shown_live) and shown["replayed"] is shown_live["replayed"] is False
