"""The set-up compiles every installed module and the project's own to bytecode: where
PYTHONDONTWRITEBYTECODE is set (many images, and the container) Python never caches what it compiles,
so without that every command loading the fitting stack compiled scikit-learn, scipy and pandas again."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    "module",
    ["sklearn.linear_model", "scipy.stats", "pandas", "matplotlib.figure", "arena.publish.snapshots"],
)
def test_the_fitting_stack_loads_from_cached_bytecode(module: str) -> None:
    source = importlib.import_module(module).__file__
    assert source is not None and source.endswith(".py")
    cached = Path(importlib.util.cache_from_source(source))
    assert cached.is_file(), (
        f"{module} has no compiled bytecode at {cached} (dont_write_bytecode="
        f"{sys.flags.dont_write_bytecode}): set up with ./dev, which compiles the installed modules and"
        " the project's"
    )


def test_the_installers_compile_what_they_install() -> None:
    dev_script = (ROOT / "dev").read_text(encoding="utf-8")
    assert dev_script.count("compile_packages") >= 3  # defined, and called after each install
    assert "compile_project" in dev_script.split("setup() {", 1)[1]
    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    assert "compileall" in dockerfile and "PYTHONDONTWRITEBYTECODE=1" in dockerfile
