"""Arena's math room: aggregation, online Elo, the Bradley-Terry family, intervals and ranks.

The public names are listed once, as plain re-exports in ``__init__.pyi`` (which type checkers read).
This module loads each of them from its submodule on first use (PEP 562), so that ``import
leaderboard.elo`` in the web app's vote path does not pay for scikit-learn and scipy.optimize.
"""

from __future__ import annotations

import importlib
import os
from typing import Any


def _read_exports() -> dict[str, str]:
    """``{name: submodule}`` from the stub's lines, each ``from .module import name as name``."""
    stub = os.path.join(os.path.dirname(__file__), "__init__.pyi")
    with open(stub, encoding="utf-8") as lines:
        rows = [line.split() for line in lines if line.startswith("from .")]
    return {row[3]: row[1].removeprefix(".") for row in rows}


_EXPORTS = _read_exports()
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'leaderboard' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"leaderboard.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return list(__all__)
