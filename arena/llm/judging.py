"""LLM-as-judge: templates, the pairs to judge, asking a judge in both orders, storing verdicts as votes.

Each pair of answers to a prompt is judged twice, once in each order (position swap). A verdict is asked
for with a JSON schema (the client's structured-output mode) and, failing that, read from free text
(``[[A>B]]``, ``[[A]]``, ...); a text that yields no verdict is asked again, then stored as unparseable,
never guessed. Servers differ in how they take a schema (OpenAI's ``json_schema``, llama-cpp-python's
``json_object``, or not at all): :func:`probe_schema_mode` asks the first pair in the endpoint's configured
mode and, when the server refuses it, in the others, so a run works with the server as it starts. Every
judgment keeps its raw text, the template's sha256 and the judge's parameters, and a parsed one becomes votes
of the annotator ``judge:<endpoint>`` (kind ``judge``): they stay out of the live standings and out of boards
unless asked for (``arena recompute --annotators judge:NAME``).
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import random
import re
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jinja2 import StrictUndefined
from jinja2.sandbox import SandboxedEnvironment
from sqlalchemy import insert, select
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError

from arena.llm.client import (
    SCHEMA_MODES,
    Completion,
    EndpointClient,
    EndpointError,
    EndpointResponseError,
    Message,
    SchemaMode,
)
from leaderboard.data import Outcome
from votes.models import utcnow
from votes.names import ModelRole
from votes.reads.filters import JUDGE_KIND
from votes.tables import annotator_t, battle_t, judgment_t, model_t, output_t, prompt_t, vote_t

__all__ = [
    "BUILTIN_TEMPLATES",
    "JudgeReport",
    "JudgeTask",
    "JudgeTemplate",
    "ModeProbe",
    "builtin_template",
    "judge_label",
    "load_template",
    "parse_verdict",
    "plan_judging",
    "probe_schema_mode",
    "run_judging",
]

#: Winner string of each verdict label, and whether it is a strong verdict.
_OUTCOMES: dict[str, tuple[str, bool]] = {
    "A>>B": (Outcome.MODEL_A.label, True),
    "A>B": (Outcome.MODEL_A.label, False),
    "A=B": (Outcome.TIE.label, False),
    "B>A": (Outcome.MODEL_B.label, False),
    "B>>A": (Outcome.MODEL_B.label, True),
    "A": (Outcome.MODEL_A.label, False),
    "B": (Outcome.MODEL_B.label, False),
    "tie": (Outcome.TIE.label, False),
}

_ARENA_HARD = """\
{% if system %}[system]
You judge two AI assistants' answers to the user's prompt below. Compare helpfulness, correctness, \
relevance and concision; ignore the order and the length of the answers and the assistants' names.
{% if reference %}A reference answer is given: use it to check correctness.
{% endif %}Give a verdict: A>>B (A is much better), A>B (A is better), A=B (about the same), \
B>A (B is better) or B>>A (B is much better). End with the verdict in double brackets, e.g. [[A>B]].
{% else %}[user]
<|prompt|>
{{ prompt }}
<|end prompt|>
{% if reference %}<|reference answer|>
{{ reference }}
<|end reference answer|>
{% endif %}<|answer A|>
{{ answer_a }}
<|end answer A|>
<|answer B|>
{{ answer_b }}
<|end answer B|>
{% endif %}"""

_MT_BENCH = """\
{% if system %}[system]
Act as an impartial judge: decide which of two AI assistants answered the user's question better, \
judging helpfulness, relevance, accuracy, depth and detail. Do not let the order, the length or the \
names of the assistants sway you.{% if reference %} Compare both with the reference answer.{% endif %}
After a short explanation give the verdict: [[A]] if A is better, [[B]] if B is better, [[C]] for a tie.
{% else %}[user]
[Question]
{{ prompt }}
{% if reference %}[Reference answer]
{{ reference }}
{% endif %}[The start of assistant A's answer]
{{ answer_a }}
[The end of assistant A's answer]
[The start of assistant B's answer]
{{ answer_b }}
[The end of assistant B's answer]
{% endif %}"""


@dataclass(frozen=True)
class JudgeTemplate:
    """A judge prompt: Jinja source rendered twice (``system`` true, then false), and its verdicts."""

    name: str
    source: str
    verdicts: tuple[str, ...]

    @property
    def sha256(self) -> str:
        body = json.dumps({"source": self.source, "verdicts": self.verdicts}, sort_keys=True)
        return hashlib.sha256(body.encode()).hexdigest()

    @property
    def schema(self) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {"verdict": {"type": "string", "enum": list(self.verdicts)}},
            "required": ["verdict"],
        }

    def messages(self, prompt: str, answer_a: str, answer_b: str, reference: str | None) -> list[Message]:
        env = SandboxedEnvironment(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True)
        tpl = env.from_string(self.source)
        context = {"prompt": prompt, "answer_a": answer_a, "answer_b": answer_b, "reference": reference}
        system = _strip_tag(tpl.render(system=True, **context), "[system]")
        user = _strip_tag(tpl.render(system=False, **context), "[user]")
        turns: list[Message] = [{"role": "system", "content": system}] if system else []
        turns.append({"role": "user", "content": user})
        return turns


def _strip_tag(text: str, tag: str) -> str:
    text = text.strip()
    return text[len(tag) :].strip() if text.startswith(tag) else text


BUILTIN_TEMPLATES: dict[str, JudgeTemplate] = {
    "arena-hard": JudgeTemplate("arena-hard", _ARENA_HARD, ("A>>B", "A>B", "A=B", "B>A", "B>>A")),
    "mt-bench": JudgeTemplate("mt-bench", _MT_BENCH, ("A", "B", "tie")),
}


def builtin_template(name: str) -> JudgeTemplate:
    return BUILTIN_TEMPLATES[name]


def load_template(path: Path, *, verdicts: str) -> JudgeTemplate:
    """A user's Jinja template (variables ``system``, ``prompt``, ``answer_a``, ``answer_b``,
    ``reference``) with the verdict labels of a built-in style (``arena-hard`` or ``mt-bench``)."""
    return JudgeTemplate(path.name, path.read_text(encoding="utf-8"), BUILTIN_TEMPLATES[verdicts].verdicts)


_BRACKETS = re.compile(r"\[\[\s*(A>>B|A>B|A=B|B>A|B>>A|A|B|C|tie)\s*\]\]", re.IGNORECASE)


def parse_verdict(text: str, template: JudgeTemplate) -> str | None:
    """The verdict label in a judge's answer: JSON ``{"verdict": ...}`` or the last ``[[...]]`` in free
    text (``[[C]]`` is a tie in the three-way style); None when there is none or it is ambiguous."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("verdict"), str):
        label = data["verdict"].strip()
        return label if label in template.verdicts else None
    found = {m.upper() if m.lower() != "tie" else "tie" for m in _BRACKETS.findall(text)}
    found = {"tie" if f == "C" else f for f in found}
    if len(found) != 1:
        return None
    (label,) = found
    return label if label in template.verdicts else None


def judge_label(judge: str) -> str:
    return f"judge:{judge}"


@dataclass(frozen=True)
class JudgeTask:
    """One ordered pair: ``output_a`` is shown first."""

    prompt_id: int
    prompt: str
    output_a_id: int
    output_b_id: int
    model_a_id: int
    model_b_id: int
    answer_a: str
    answer_b: str
    reference: str | None


@dataclass(frozen=True)
class ModeProbe:
    """How a judge's server takes a verdict's schema: the mode it answered in, that first answer, and the
    modes it refused before, each with the server's reason."""

    mode: SchemaMode
    first: Completion
    refused: tuple[tuple[SchemaMode, str], ...] = ()


@dataclass
class JudgeReport:
    """What a run did; its tokens are summed from the stored judgments (:mod:`votes.catalog.costs`).
    ``failures`` holds (which pair, why) per failed request; ``probe`` how the server took the schema."""

    run_id: str
    n_planned: int = 0
    n_parsed: int = 0
    n_unparseable: int = 0
    n_votes: int = 0
    n_already: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)
    seconds: float = 0.0
    probe: ModeProbe | None = None


#: Error statuses by which a server refuses a request's form rather than failing to serve it (a 500 counts
#: only when its message names the response format: llama-cpp-python's validation error is a 500).
_REFUSING_STATUSES = frozenset({400, 404, 415, 422})


def _refuses_mode(exc: EndpointResponseError) -> bool:
    """Whether an error says the server will not take the request as asked (not that it failed)."""
    text = str(exc).lower()
    named = any(word in text for word in ("response_format", "json_schema", "json_object", "schema"))
    return exc.status in _REFUSING_STATUSES or (exc.status == 500 and named)


async def probe_schema_mode(
    client: EndpointClient, messages: Sequence[Message], schema: dict[str, Any]
) -> ModeProbe:
    """Ask once in the endpoint's configured mode and, while the server refuses the request's form, in each
    other mode (``json_schema``, ``json_object``, then free ``text``); the first answer wins.

    Raises
    ------
    EndpointUnavailable
        The server cannot be reached (the run stops at once: every other request would fail the same way).
    EndpointResponseError
        An error that is not a refusal of the mode, or every mode refused (the message names each reason).
    """
    configured = client.config.json_schema_mode
    refused: list[tuple[SchemaMode, str]] = []
    for mode in (configured, *(m for m in SCHEMA_MODES if m != configured)):
        try:
            first = await client.complete(messages, json_schema=schema, json_schema_mode=mode, retries=0)
        except EndpointResponseError as exc:
            if not _refuses_mode(exc):
                raise
            why = str(exc)
            refused.append((mode, why[why.find("HTTP ") :] if "HTTP " in why else why))
            continue
        return ModeProbe(mode, first, tuple(refused))
    reasons = "; ".join(f"{mode}: {why}" for mode, why in refused)
    raise EndpointResponseError(client.config.name, f"refused every way of asking for a verdict ({reasons})")


def plan_judging(
    conn: Connection,
    *,
    judge: str,
    template: JudgeTemplate,
    models: Sequence[str] | None = None,
    baseline: str | None = None,
    sample: int | None = None,
    reference: str | None = None,
    seed: int = 0,
) -> list[JudgeTask]:
    """Ordered pairs still to judge: for each prompt, every two models' answers (or each model against
    ``baseline``), in both orders; ``sample`` keeps that many unordered pairs (seeded), both orders each.
    Pairs this judge already judged with this template are left out, and so are the answers of models
    that only judge (a ``reference`` may be any model's)."""
    columns = (output_t.c.id, output_t.c.prompt_id, output_t.c.model_id, output_t.c.text, model_t.c.name)
    rows = conn.execute(
        select(*columns, model_t.c.role.in_(ModelRole.competing()).label("competes"))
        .join(model_t, model_t.c.id == output_t.c.model_id)
        .order_by(output_t.c.prompt_id, model_t.c.name)
    ).all()
    prompts = dict(conn.execute(select(prompt_t.c.id, prompt_t.c.text)).all())
    done = set(
        conn.execute(
            select(judgment_t.c.output_a_id, judgment_t.c.output_b_id).where(
                judgment_t.c.judge == judge, judgment_t.c.template_sha256 == template.sha256
            )
        ).all()
    )
    by_prompt: dict[int, list[Any]] = {}
    refs: dict[int, str] = {}
    for row in rows:
        if reference is not None and row.name == reference:
            refs[row.prompt_id] = row.text
        if not row.competes or row.name == reference:
            continue
        if models is None or row.name in models or row.name == baseline:
            by_prompt.setdefault(row.prompt_id, []).append(row)
    pairs = []
    for prompt_id, outs in by_prompt.items():
        for x, y in itertools.combinations(outs, 2):
            if baseline is None or baseline in (x.name, y.name):
                pairs.append((prompt_id, x, y))
    if sample is not None and sample < len(pairs):
        pairs = sorted(random.Random(seed).sample(pairs, sample), key=lambda p: (p[0], p[1].id, p[2].id))  # nosec B311 # a seeded, reproducible sample of pairs, not a secret
    tasks = []
    for prompt_id, x, y in pairs:
        for a, b in ((x, y), (y, x)):
            if (a.id, b.id) not in done:
                tasks.append(
                    JudgeTask(
                        prompt_id, prompts[prompt_id], a.id, b.id, a.model_id, b.model_id, a.text, b.text,
                        refs.get(prompt_id),
                    )
                )  # fmt: skip
    return tasks


def _judge_annotator(conn: Connection, judge: str) -> int:
    label = judge_label(judge)
    found = conn.execute(
        select(annotator_t.c.id).where(annotator_t.c.kind == JUDGE_KIND, annotator_t.c.label == label)
    ).scalar()
    if found is not None:
        return int(found)
    return int(
        conn.execute(
            insert(annotator_t).returning(annotator_t.c.id),
            {"kind": JUDGE_KIND, "label": label, "created_at": utcnow(), "flagged": False},
        ).scalar_one()
    )


def _store(
    engine: Engine, task: JudgeTask, row: dict[str, Any], winner: str | None, n_votes: int, judge: str
) -> bool:
    """The judgment and (when parsed) its votes in one transaction; False if it was stored already."""
    now = utcnow()
    try:
        with engine.begin() as conn:
            conn.execute(insert(judgment_t), {**row, "n_votes": n_votes, "created_at": now})
            if winner is not None and n_votes:
                annotator = _judge_annotator(conn, judge)
                for _ in range(n_votes):
                    battle_id = conn.execute(
                        insert(battle_t).returning(battle_t.c.id),
                        {
                            "prompt_id": task.prompt_id,
                            "output_a_id": task.output_a_id,
                            "output_b_id": task.output_b_id,
                            "model_a_id": task.model_a_id,
                            "model_b_id": task.model_b_id,
                            "annotator_id": annotator,
                            "issued_at": now,
                            "source": JUDGE_KIND,
                        },
                    ).scalar_one()
                    conn.execute(
                        insert(vote_t),
                        {
                            "battle_id": battle_id,
                            "model_a_id": task.model_a_id,
                            "model_b_id": task.model_b_id,
                            "annotator_id": annotator,
                            "winner": winner,
                            "created_at": now,
                        },
                    )
    except IntegrityError:
        return False
    return True


async def run_judging(
    engine: Engine,
    tasks: Sequence[JudgeTask],
    client: EndpointClient,
    template: JudgeTemplate,
    *,
    strong_weight: int = 1,
    parse_retries: int = 2,
    concurrency: int = 8,
    on_done: Callable[[], None] | None = None,
) -> JudgeReport:
    """Judge every task and store each judgment as it arrives.

    The first task goes first, alone, through :func:`probe_schema_mode`; the others are asked in the mode
    it found (``report.probe``). A strong verdict (``A>>B``, ``B>>A``) becomes ``strong_weight`` votes
    (arena-hard counts it three times), any other parsed verdict one vote; an unparseable one is stored
    with no vote.

    Raises
    ------
    EndpointError
        From the probe: the server cannot be reached, or takes no form of the request.
    """
    report = JudgeReport(run_id=uuid.uuid4().hex, n_planned=len(tasks))
    if tasks:
        first = tasks[0]
        report.probe = await probe_schema_mode(
            client, template.messages(first.prompt, first.answer_a, first.answer_b, first.reference),
            template.schema,
        )  # fmt: skip
    mode = report.probe.mode if report.probe is not None else client.config.json_schema_mode
    gate = asyncio.Semaphore(concurrency)
    cfg = client.config
    params = {
        "temperature": cfg.temperature,
        "max_tokens": cfg.max_tokens,
        "seed": cfg.seed,
        **cfg.extra_params,
    }
    params = {k: v for k, v in params.items() if v is not None}
    start = time.perf_counter()

    async def one(task: JudgeTask, answered: Completion | None) -> None:
        messages = template.messages(task.prompt, task.answer_a, task.answer_b, task.reference)
        async with gate:
            text, verdict, attempts = "", None, 0
            tokens = [0, 0]
            latency = 0.0
            try:
                while verdict is None and attempts <= parse_retries:
                    attempts += 1
                    done = answered or await client.complete(
                        messages, json_schema=template.schema, json_schema_mode=mode
                    )
                    answered = None
                    text = done.text
                    latency += done.latency_s
                    tokens[0] += done.prompt_tokens or 0
                    tokens[1] += done.completion_tokens or 0
                    verdict = parse_verdict(text, template)
            except EndpointError as exc:
                report.failures.append(
                    (f"prompt {task.prompt_id} outputs {task.output_a_id}/{task.output_b_id}", str(exc))
                )
                if on_done is not None:
                    on_done()
                return
        winner, strong = _OUTCOMES[verdict] if verdict is not None else (None, False)
        n_votes = 0 if verdict is None else (strong_weight if strong else 1)
        row = {
            "prompt_id": task.prompt_id,
            "output_a_id": task.output_a_id,
            "output_b_id": task.output_b_id,
            "judge": cfg.name,
            "template": template.name,
            "template_sha256": template.sha256,
            "params": {**params, "strong_weight": strong_weight, "json_schema_mode": mode},
            "raw_text": text,
            "verdict": verdict,
            "n_attempts": attempts,
            "prompt_tokens": tokens[0],
            "completion_tokens": tokens[1],
            "latency_s": latency,
            "run_id": report.run_id,
        }
        if _store(engine, task, row, winner, n_votes, cfg.name):
            report.n_votes += n_votes
            if verdict is None:
                report.n_unparseable += 1
            else:
                report.n_parsed += 1
        else:
            report.n_already += 1
        if on_done is not None:
            on_done()

    probed = report.probe.first if report.probe is not None else None
    await asyncio.gather(*(one(t, probed if i == 0 else None) for i, t in enumerate(tasks)))
    report.seconds = time.perf_counter() - start
    return report
