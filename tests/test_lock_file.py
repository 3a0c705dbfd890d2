"""The lock files that CI (``./dev``) and the container install from agree with pyproject.toml.

Every declared dependency is pinned, the pin satisfies the declared bounds (so the floors above published
advisories hold for what is actually installed), every pin carries hashes, the run-time lock agrees with
the dev lock, and the installers use the locks with ``--require-hashes``. After changing dependencies:
``./dev lock`` (docs/deployment.md).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
RUNTIME_LOCK = ROOT / "requirements.lock"
DEV_LOCK = ROOT / "requirements-dev.lock"
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s;\\]+)\s*(?:;\s*([^\\]+?))?\s*\\?$")


def pins(lock: Path) -> dict[str, list[tuple[Version, str | None, bool]]]:
    """name -> [(version, marker, has hashes)] (a universal lock may pin a package per platform)."""
    found: dict[str, list[tuple[Version, str | None, bool]]] = {}
    lines = lock.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        match = PIN.match(line)
        if not match:
            continue
        hashed = i + 1 < len(lines) and lines[i + 1].strip().startswith("--hash=sha256:")
        name = canonicalize_name(match.group(1))
        found.setdefault(name, []).append((Version(match.group(2)), match.group(3), hashed))
    return found


def declared(*extras: str) -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    lines = list(project["dependencies"])
    for extra in extras:
        lines += project["optional-dependencies"][extra]
    return [Requirement(line) for line in lines]


@pytest.mark.parametrize(("lock", "extras"), [(RUNTIME_LOCK, ()), (DEV_LOCK, ("dev",))])
def test_lock_pins_every_dependency_within_its_bounds(lock: Path, extras: tuple[str, ...]) -> None:
    locked = pins(lock)
    assert locked, f"{lock.name} pins nothing"
    for requirement in declared(*extras):
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue
        name = canonicalize_name(requirement.name)
        assert name in locked, f"{requirement.name} is declared but not in {lock.name}: run ./dev lock"
        for version, _, _ in locked[name]:
            assert requirement.specifier.contains(version, prereleases=True), (
                f"{lock.name} pins {name}=={version}, outside {requirement.specifier}: run ./dev lock"
            )
    unhashed = [name for name, entries in locked.items() if not all(h for _, _, h in entries)]
    assert unhashed == [], f"pins without hashes in {lock.name}: {unhashed}"


def test_runtime_lock_agrees_with_the_dev_lock() -> None:
    runtime, dev = pins(RUNTIME_LOCK), pins(DEV_LOCK)
    for name, entries in runtime.items():
        assert name in dev, name
        assert {v for v, _, _ in entries} <= {v for v, _, _ in dev[name]}, name


def test_installers_use_the_locks_with_hashes() -> None:
    dev_script = (ROOT / "dev").read_text(encoding="utf-8")
    assert "LOCK=requirements-dev.lock" in dev_script
    assert '--require-hashes -r "$LOCK"' in dev_script
    assert '-c "$LOCK"' in dev_script  # the LLM server's install keeps the locked versions
    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    assert "--require-hashes -r requirements.lock" in dockerfile and "--no-deps -e ." in dockerfile
    assert "./dev check" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")  # CI installs through ./dev
