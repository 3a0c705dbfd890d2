"""A snapshot folder as a dataset: the card (``README.md`` with ``configs:``) and the models table.

The Hugging Face ``datasets`` library and the Hub read a folder's ``README.md`` front matter: each entry of
``configs`` names a table and its files, so ``datasets.load_dataset(folder)`` gives the leaderboard (the
default configuration, split ``leaderboard``) and ``load_dataset(folder, "models")`` the model metadata,
and the folder can be pushed to a dataset repository as it is. Pure text; the snapshot writer adds both
files beside the data they describe.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from pathlib import PurePath
from typing import Any

from leaderboard.snapshot.files import BATTLES_FILE, CSV_FILE, OBSERVED_FILE, PREDICTED_FILE
from leaderboard.spreadsheet import escape_cell

__all__ = ["CARD_FILE", "MODEL_COLUMNS", "MODELS_FILE", "dataset_card", "models_csv"]

CARD_FILE = "README.md"
MODELS_FILE = "models.csv"
#: Columns of ``models.csv``: what public boards show about a model (empty where unknown).
MODEL_COLUMNS: tuple[str, ...] = ("model", "organisation", "licence", "link", "knowledge_cutoff")

#: (configuration, file, what it holds): the tables a snapshot carries, the leaderboard first; each
#: configuration is named after its file.
_TABLES: tuple[tuple[str, str, str], ...] = tuple(
    (PurePath(path).stem, path, what)
    for path, what in (
        (CSV_FILE, "one row per model: rating, interval, ranks, battles, win rate"),
        (MODELS_FILE, "organisation, licence, link and knowledge cutoff of each model"),
        (OBSERVED_FILE, "observed win rate of each row model against each column"),
        (PREDICTED_FILE, "win rate the fitted model predicts for each pair"),
        (BATTLES_FILE, "number of battles between each pair of models"),
        ("leaderboard_style.csv", "the style-controlled board, with rank changes"),
    )
)


def models_csv(models: Sequence[str], info: Mapping[str, Mapping[str, Any]]) -> bytes:
    """``models.csv``: one row per model of the board (in board order), the metadata ``info`` knows."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(MODEL_COLUMNS)
    for name in models:
        known = info.get(name, {})
        cells = [name, *("" if known.get(c) is None else str(known[c]) for c in MODEL_COLUMNS[1:])]
        writer.writerow([escape_cell(c) for c in cells])
    return buffer.getvalue().encode("utf-8")


def _voters_text(voters: Any) -> str:
    """Who cast the votes, in a sentence: people, LLM judges, or not known."""
    if not isinstance(voters, Mapping):
        return "Who cast each vote (a person or an LLM judge) is not recorded here."
    judged, human = voters.get("llm_judge_verdicts"), voters.get("human_votes")
    names = ", ".join(str(j) for j in voters.get("llm_judges") or [])
    if isinstance(judged, int) and isinstance(human, int):
        if judged == 0:
            return f"All {human} are human votes (no annotator is labelled as an LLM judge)."
        if human <= 0:
            return f"All {judged} are verdicts of LLM judges ({names}), not human votes."
        return f"{human} are human votes and {judged} verdicts of LLM judges ({names})."
    if names:
        return f"They include verdicts of LLM judges ({names}) beside human votes."
    return "The source does not say who cast each vote (a person or an LLM judge)."


def _intervals_lines(intervals: Any) -> list[str]:
    """What the intervals and the rank columns are (``metadata.json`` -> ``intervals``)."""
    if not isinstance(intervals, Mapping):
        return []
    level = intervals.get("level")
    percent = f"{100 * level:g}%" if isinstance(level, int | float) else "their"
    return [
        f"Intervals (`ci_low`, `ci_high`): {percent} {intervals.get('method')} over {intervals.get('unit')}; "
        f"{intervals.get('coverage')}. Fit: {intervals.get('fit')}. `rank_low`, `rank_high`: "
        f"{str(intervals.get('ranks', '')).removeprefix('rank_low and rank_high are ')}.",
        "",
    ]


def dataset_card(metadata: Mapping[str, Any], files: Sequence[str]) -> bytes:
    """The dataset card of a snapshot: YAML front matter with one ``configs`` entry per table present.

    Parameters
    ----------
    metadata : the snapshot's metadata (method, seed, votes digest, vote and model counts, slice, who cast
        the votes under ``voters``, what the intervals are under ``intervals``)
    files : names of the files in the folder (tables absent from it are left out of ``configs``)

    Returns
    -------
    bytes
        UTF-8 Markdown.
    """
    present = [(name, path, what) for name, path, what in _TABLES if path in files]
    lines = ["---", "configs:"]
    for name, path, _ in present:
        lines += [f"- config_name: {name}", "  data_files:", f"  - split: {name}", f"    path: {path}"]
        if name == "leaderboard":
            lines.append("  default: true")
    lines += ["tags:", "- leaderboard", "- pairwise-comparison", "- bradley-terry", "---", ""]
    slice_name = str(metadata.get("slice", "all"))
    lines += [
        f"# Arena leaderboard snapshot ({'overall' if slice_name == 'all' else slice_name})",
        "",
        f"Ratings of {metadata.get('n_models')} models from {metadata.get('n_votes')} pairwise votes, "
        f"fitted with `{metadata.get('method')}` ({metadata.get('interval')} intervals, seed "
        f"{metadata.get('seed')}). {_voters_text(metadata.get('voters'))} Recompute it with `arena "
        "recompute` from the same votes and seed: the data files come out byte for byte the same.",
        "",
        *_intervals_lines(metadata.get("intervals")),
        "| configuration | file | contents |",
        "| --- | --- | --- |",
        *(f"| `{name}` | `{path}` | {what} |" for name, path, what in present),
        "",
        "```python",
        "from datasets import load_dataset",
        'board = load_dataset("path/to/this/folder")["leaderboard"]',
        "```",
        "",
        "## Provenance",
        "",
        f"- votes sha256: `{metadata.get('votes_sha256')}`",
        f"- package: {metadata.get('package')} {metadata.get('package_version')}",
        f"- parameters: `{json.dumps(metadata.get('parameters', {}), sort_keys=True, default=str)}`",
        "",
        "`metadata.json` lists the sha256 of every file; `sha256sum FILE` checks a download.",
        "",
    ]
    return "\n".join(lines).encode("utf-8")
