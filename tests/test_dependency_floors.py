"""The declared lower bounds of the run-time dependencies exclude versions with published advisories."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
# Package -> first version without the advisories named in pyproject.toml.
FIXED_IN = {
    "cryptography": "44.0.1",
    "fastapi": "0.115.3",
    "h11": "0.16",
    "jinja2": "3.1.6",
    "python-multipart": "0.0.18",
    "starlette": "0.40.0",
}


def lower_bounds() -> dict[str, Version]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    bounds: dict[str, Version] = {}
    for line in project["dependencies"]:
        requirement = Requirement(line)
        floors = [Version(s.version) for s in requirement.specifier if s.operator in (">=", "==", "~=")]
        if floors:
            bounds[requirement.name.lower()] = max(floors)
    return bounds


def test_floors_are_above_known_advisories() -> None:
    bounds = lower_bounds()
    for package, fixed in FIXED_IN.items():
        assert package in bounds, f"{package} has no lower bound"
        assert bounds[package] >= Version(fixed), f"{package}>={bounds[package]} admits a vulnerable version"
