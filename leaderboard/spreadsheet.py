"""CSV cells a spreadsheet would run, written so it shows them instead; read back exactly.

Researchers open snapshot and export CSVs in spreadsheets, which treat a cell starting with ``=``, ``+``,
``-``, ``@`` (and a tab or carriage return before one) as a formula: ``=HYPERLINK(...)`` in a model name
or an answer becomes a live link or worse. A text cell starting with one of these is written with a
leading apostrophe, the spreadsheet convention for "this is text" (OWASP's advice on CSV injection).
Numbers are never touched (a negative rating stays a number), and JSON lines and Parquet stay exact.

The rule is reversible: a cell that already starts with an apostrophe followed by something that would be
escaped gets one more apostrophe, and :func:`unescape_cell` takes exactly one off, so export -> import ->
export gives the same bytes.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["FORMULA_STARTS", "escape_cell", "escape_frame", "unescape_cell"]

#: First characters that make a spreadsheet evaluate a cell.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|[+-]?(inf|nan)")


def _needs_escape(cell: str) -> bool:
    if cell.startswith(FORMULA_STARTS):
        return _NUMBER.fullmatch(cell) is None
    return cell.startswith("'") and _needs_escape(cell[1:])


def escape_cell(cell: str) -> str:
    """``cell`` as a spreadsheet shows it literally (an apostrophe before a formula start)."""
    return "'" + cell if _needs_escape(cell) else cell


def unescape_cell(cell: str) -> str:
    """The inverse of :func:`escape_cell`, for readers of the CSVs written here."""
    return cell[1:] if cell.startswith("'") and _needs_escape(cell[1:]) else cell


def escape_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``frame`` with its text cells, column names and index labels escaped."""
    import pandas as pd  # the frame's own library, not imported by the importers that only unescape

    out = frame.copy()
    for column in out.columns:
        if out[column].dtype == object:
            out[column] = out[column].map(lambda v: escape_cell(v) if isinstance(v, str) else v)
    out.columns = pd.Index([escape_cell(c) if isinstance(c, str) else c for c in out.columns])
    if out.index.dtype == object:
        out.index = pd.Index(
            [escape_cell(i) if isinstance(i, str) else i for i in out.index], name=out.index.name
        )
    return out
