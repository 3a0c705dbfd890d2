"""Catalog rows validated without a database: prompts (text or conversation) and the models' outputs."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from votes.files.fields import RowFields
from votes.files.records import SHORT_MAX, FileFormat, Message, check_columns

__all__ = ["MAX_SAMPLES", "CatalogRecord", "parse_catalog"]

#: Most sampled answers one model may have to one prompt (``arena generate --samples``, catalog files).
MAX_SAMPLES = 16


@dataclass(frozen=True, slots=True)
class CatalogRecord:
    """One validated catalog row: a prompt and, unless both are None, one model's output: its
    ``sample``-th distinct answer to that prompt in the file (0 for the first)."""

    where: str
    prompt_id: str
    prompt: str | tuple[Message, ...]
    category: str | None = None
    language: str | None = None
    model: str | None = None
    output: str | None = None
    sample: int = 0

    def row(self) -> dict[str, Any]:
        return {
            "prompt_id": self.prompt_id,
            "prompt": self.prompt if isinstance(self.prompt, str) else [dict(m) for m in self.prompt],
            "category": self.category,
            "language": self.language,
            "model": self.model,
            "output": self.output,
        }


def parse_catalog(
    path: Path, fmt: FileFormat, rows: Iterable[tuple[str, Mapping[str, Any]]]
) -> list[CatalogRecord]:
    """Validate catalog rows, including that repeated prompts agree within the file.

    A model may answer one prompt several times: each distinct output is a sample, numbered in file
    order (a repeated identical output is the same sample), at most ``MAX_SAMPLES`` of them.
    """
    rows = list(rows)
    check_columns(path, fmt, rows, "catalog")
    text_cells = fmt in ("csv", "parquet")
    records: list[CatalogRecord] = []
    prompts: dict[str, CatalogRecord] = {}
    outputs: dict[tuple[str, str], list[str]] = {}
    for where, raw in rows:
        r = RowFields(path, where, raw, text_cells=fmt == "csv")
        prompt_id = cast(str, r.identifier("prompt_id", required=True))
        if isinstance(raw.get("prompt"), str) and not text_cells:
            # In JSON a string prompt is text, even when it looks like JSON.
            prompt: str | tuple[Message, ...] = cast(str, r.text("prompt", required=True))
        else:
            prompt = r.messages("prompt", required=True, text_allowed=True)
        model = r.model("model")
        output = r.text("output")
        if (model is None) != (output is None):
            raise r.fail("'model' and 'output' must be given together (or both left out for a bare prompt)")
        sample = 0
        if model is not None and output is not None:
            samples = outputs.setdefault((prompt_id, model), [])
            if output in samples:
                sample = samples.index(output)
            elif len(samples) >= MAX_SAMPLES:
                raise r.fail(
                    f"more than {MAX_SAMPLES} different outputs of model {model!r} for prompt {prompt_id!r}"
                )
            else:
                sample = len(samples)
                samples.append(output)
        record = CatalogRecord(
            where=where,
            prompt_id=prompt_id,
            prompt=prompt,
            category=r.string("category", max_length=SHORT_MAX),
            language=r.string("language", max_length=50),
            model=model,
            output=output,
            sample=sample,
        )
        first = prompts.setdefault(prompt_id, record)
        if (first.prompt, first.category, first.language) != (
            record.prompt,
            record.category,
            record.language,
        ):
            raise r.fail(f"prompt {prompt_id!r} differs from its first appearance ({first.where})")
        records.append(record)
    return records
