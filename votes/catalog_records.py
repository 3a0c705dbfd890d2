"""Catalog rows validated without a database: prompts (text or conversation) and the models' outputs."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from votes.records import SHORT_MAX, FileFormat, Message, RowFields, check_columns

__all__ = ["CatalogRecord", "parse_catalog"]


@dataclass(frozen=True, slots=True)
class CatalogRecord:
    """One validated catalog row: a prompt and, unless both are None, one model's output."""

    where: str
    prompt_id: str
    prompt: str | tuple[Message, ...]
    category: str | None = None
    language: str | None = None
    model: str | None = None
    output: str | None = None

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
    """Validate catalog rows, including that repeated prompts and outputs agree within the file."""
    rows = list(rows)
    check_columns(path, fmt, rows, "catalog")
    text_cells = fmt in ("csv", "parquet")
    records: list[CatalogRecord] = []
    prompts: dict[str, CatalogRecord] = {}
    outputs: dict[tuple[str, str], str] = {}
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
        record = CatalogRecord(
            where=where,
            prompt_id=prompt_id,
            prompt=prompt,
            category=r.string("category", max_length=SHORT_MAX),
            language=r.string("language", max_length=50),
            model=model,
            output=output,
        )
        first = prompts.setdefault(prompt_id, record)
        if (first.prompt, first.category, first.language) != (
            record.prompt,
            record.category,
            record.language,
        ):
            raise r.fail(f"prompt {prompt_id!r} differs from its first appearance ({first.where})")
        if model is not None and output is not None:
            previous = outputs.setdefault((prompt_id, model), output)
            if previous != output:
                raise r.fail(f"a second, different output of model {model!r} for prompt {prompt_id!r}")
        records.append(record)
    return records
