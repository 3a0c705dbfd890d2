"""Imports flow one way (leaderboard <- votes <- arena), and no package has an import cycle.

The rules are import-linter contracts in pyproject.toml (``[tool.importlinter]``); ``lint-imports`` reads
every import statement, function-local and ``TYPE_CHECKING`` ones included. These tests run it on the
project and, to show the contracts can fail, on small throw-away packages that break each rule.

The house's shape is held here too: module and folder sizes, function-local imports, and one table per
kind of extension (raters, battle formats, outcomes) whose words no other module spells.
"""

from __future__ import annotations

import ast
import io
import os
import subprocess
import sys
import tokenize
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from leaderboard.data import OUTCOME_STRINGS
from leaderboard.online.table import RATERS
from leaderboard.snapshot.figures import FIGURES
from votes.files.formats import SOURCE_FORMATS

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("arena", "votes", "leaderboard")
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def contracts_toml() -> str:
    """The ``[tool.importlinter]`` tables of the project's pyproject.toml, as TOML text."""
    lines = (ROOT / "pyproject.toml").read_text(encoding="utf-8").splitlines()
    kept: list[str] = []
    inside = False
    for line in lines:
        if line.startswith("["):
            inside = line.lstrip("[").startswith("tool.importlinter")
        if inside:
            kept.append(line)
    return "\n".join(kept) + "\n"


def lint_imports(where: Path) -> subprocess.CompletedProcess[str]:
    """Run ``lint-imports`` with the project's contracts on the packages found in ``where``."""
    env = {**os.environ, "PYTHONPATH": str(where)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo"],
        cwd=where,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_contracts_are_those_of_the_house() -> None:
    config = tomllib.loads(contracts_toml())["tool"]["importlinter"]
    assert config["root_packages"] == list(PACKAGES)
    by_id = {c["id"]: c for c in config["contracts"]}
    assert by_id["layers"]["layers"] == ["arena", "votes", "leaderboard"]
    assert {"fastapi", "sqlmodel", "sqlalchemy", "jinja2", "uvicorn"} <= set(
        by_id["pure-math"]["forbidden_modules"]
    )
    assert by_id["acyclic"]["ancestors"] == list(PACKAGES)


def test_the_project_keeps_its_import_contracts() -> None:
    done = lint_imports(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


def room_names() -> list[str]:
    """Every room and module the rooms contracts name (``leaderboard.bt``, ``votes.db``, ...)."""
    config = tomllib.loads(contracts_toml())["tool"]["importlinter"]
    names = []
    for contract in config["contracts"]:
        for container in contract.get("containers", []):
            for layer in contract["layers"]:
                names += [f"{container}.{tail.strip()}" for tail in layer.replace("|", ":").split(":")]
    return names


def write_packages(root: Path, modules: dict[str, str]) -> None:
    """Three empty packages named like the project's, with the rooms the contracts name (each an empty
    package), plus ``modules`` (dotted name -> source)."""
    for package in [*PACKAGES, *room_names()]:
        if package not in modules:
            (root / package.replace(".", "/")).mkdir(parents=True)
            (root / package.replace(".", "/") / "__init__.py").write_text('"""A stand-in."""\n', "utf-8")
    for name, source in modules.items():
        path = root.joinpath(*name.split(".")).with_suffix(".py")
        path.write_text(source, encoding="utf-8")
    (root / "pyproject.toml").write_text(contracts_toml(), encoding="utf-8")


def test_well_behaved_packages_pass(tmp_path: Path) -> None:
    write_packages(
        tmp_path,
        {
            "votes.models": "import sqlalchemy\n",
            "arena.app": "from votes import models\n\n\ndef f() -> None:\n    import fastapi\n",
        },
    )
    done = lint_imports(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


# Each case breaks exactly one contract; the function-local ones would slip past a top-level-only check.
BROKEN = {
    "math imports storage": (
        {"votes.models": "", "leaderboard.bt.fit": "from votes.models import Vote\nimport sqlalchemy.orm\n"},
        ["Imports flow one way", "The math imports no web"],
    ),
    "math imports storage in a function": (
        {"votes.models": "", "leaderboard.bt.fit": "def f() -> None:\n    from votes import models\n"},
        ["Imports flow one way"],
    ),
    "math imports a web library in a function": (
        {"leaderboard.bt.fit": "def f() -> None:\n    import fastapi\n"},
        ["The math imports no web"],
    ),
    "storage imports the web app in a function": (
        {"arena.app": "", "votes.reads.store": "def f() -> None:\n    from arena import app\n"},
        ["Imports flow one way"],
    ),
    "storage imports a web library": (
        {"votes.reads.store": "from starlette.requests import Request\n"},
        ["The storage imports no web"],
    ),
    "a room of the math imports a room above it": (
        {"leaderboard.bt.fit": "def f() -> None:\n    from leaderboard.composite import board\n"},
        ["The math's rooms import only downward"],
    ),
    "a module of the math outside every room": (
        {"leaderboard.stray": ""},
        ["The math's rooms import only downward"],
    ),
    "a cycle closed by a function-local import": (
        {
            "arena.app": "from arena import routes\n",
            "arena.web.routes": "def f() -> None:\n    from arena.app import create_app\n",
        },
        ["No import cycle inside a package"],
    ),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_each_contract_fails_on_the_import_it_forbids(tmp_path: Path, case: str) -> None:
    modules, broken = BROKEN[case]
    write_packages(tmp_path, modules)
    done = lint_imports(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    for name in broken:
        assert name in done.stdout and "BROKEN" in done.stdout, done.stdout
    assert f"{len(broken)} broken" in done.stdout, done.stdout


def import_guards(path: Path) -> list[int]:
    """Lines of ``try: import ... except ImportError`` (or ModuleNotFoundError) in a module."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Try):
            continue
        imports = any(isinstance(n, ast.Import | ast.ImportFrom) for s in node.body for n in ast.walk(s))
        caught = {
            n.id
            for h in node.handlers
            if h.type is not None
            for n in ast.walk(h.type)
            if isinstance(n, ast.Name)
        }
        if imports and caught & {"ImportError", "ModuleNotFoundError"}:
            lines.append(node.lineno)
    return lines


def test_no_import_is_silently_optional() -> None:
    """A missing module must be an error, not a page or command that quietly disappears."""
    found = {
        str(path.relative_to(ROOT)): import_guards(path)
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
    }
    assert not {k: v for k, v in found.items() if v}


def test_the_guard_check_sees_a_guard(tmp_path: Path) -> None:
    guarded = tmp_path / "guarded.py"
    guarded.write_text("try:\n    import pandas\nexcept ImportError:\n    pandas = None\n", encoding="utf-8")
    assert import_guards(guarded) == [1]


#: Libraries of the fitting and plotting stack that a web worker loads only when it fits or draws
#: (publishing, the annotator review): each adds seconds to every worker's start-up.
FITTING_STACK = ("sklearn", "matplotlib", "scipy.optimize", "scipy.stats")

_PROBE = """
import sys
from fastapi.testclient import TestClient
from arena.app import create_app
from arena.settings import Settings

with TestClient(create_app(Settings(database_url=sys.argv[1], secret_key="k" * 32))) as client:
    assert client.get("/vote").status_code == 200
    assert client.get("/leaderboard").status_code == 200
print(" ".join(sorted(m for m in sys.modules if m.startswith(tuple(sys.argv[2:])))))
"""


def test_web_worker_serves_without_the_fitting_stack(tmp_path: Path) -> None:
    """The site starts and serves votes and the board without importing scikit-learn, scipy's optimisers
    or matplotlib (they load on the first publish or review)."""
    from votes.migrate import upgrade_database

    url = f"sqlite:///{tmp_path / 'site.db'}"
    upgrade_database(url)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, url, *FITTING_STACK],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
        check=True,
    )
    assert out.stdout.split() == []


# -- the shape of the house: small modules, small folders, imports at the top --------------------------

#: The most lines a module of the packages may have: a reader holds one in their head.
MODULE_LINES_MAX = 500
#: The most modules a folder may hold side by side before it needs rooms.
FOLDER_MODULES_MAX = 20
#: Folders exempt from the count: Alembic's revisions are a history, read one at a time, never side by side.
FOLDERS_EXEMPT = {"votes/migrations/versions"}

#: Modules still over MODULE_LINES_MAX, with their size today. The list may only shrink: a module here may
#: not grow, and one that drops under the limit must leave the list.
OVERSIZED_MODULES: dict[str, int] = {}
#: Folders still over FOLDER_MODULES_MAX, with their count today; likewise only shrinking.
CROWDED_FOLDERS: dict[str, int] = {}


def package_modules() -> list[Path]:
    """Every Python module of the three packages."""
    return [path for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))]


def test_no_module_outgrows_a_reader() -> None:
    sizes = {
        str(path.relative_to(ROOT)): len(path.read_text(encoding="utf-8").splitlines())
        for path in package_modules()
    }
    over = {name: n for name, n in sizes.items() if n > MODULE_LINES_MAX}
    grown = {name: n for name, n in over.items() if n > OVERSIZED_MODULES.get(name, MODULE_LINES_MAX)}
    assert not grown, f"modules over {MODULE_LINES_MAX} lines (split them into a room): {grown}"
    stale = {name: sizes.get(name) for name in OVERSIZED_MODULES if name not in over}
    assert not stale, f"now at or under the limit (or gone): take them off OVERSIZED_MODULES: {stale}"


def folder_counts(paths: list[Path]) -> dict[str, int]:
    """How many of ``paths`` each folder holds, by the folder's path in the project."""
    counts: dict[str, int] = {}
    for path in paths:
        folder = str(path.parent.relative_to(ROOT))
        counts[folder] = counts.get(folder, 0) + 1
    return counts


def test_no_folder_outgrows_a_reader() -> None:
    """Nor a folder of tests more test modules: a room's tests that outgrow it split as the room would."""
    counts = folder_counts(package_modules()) | folder_counts(sorted((ROOT / "tests").rglob("test_*.py")))
    over = {f: n for f, n in counts.items() if n > FOLDER_MODULES_MAX and f not in FOLDERS_EXEMPT}
    grown = {f: n for f, n in over.items() if n > CROWDED_FOLDERS.get(f, FOLDER_MODULES_MAX)}
    assert not grown, f"folders over {FOLDER_MODULES_MAX} modules (give them rooms): {grown}"
    stale = {f: counts.get(f) for f in CROWDED_FOLDERS if f not in over}
    assert not stale, f"now at or under the limit: take them off CROWDED_FOLDERS: {stale}"


def misplaced_test_folders(root: Path) -> list[str]:
    """Folders of ``tests/<package>/`` under ``root`` that are no room of ``<package>``: every folder right
    under ``tests/<package>/``, and every deeper one that holds Python (a room's data, such as its golden
    files, sits in a folder of the room's without Python)."""
    found = []
    for package in PACKAGES:
        tests = root / "tests" / package
        for folder in sorted(p for p in tests.rglob("*") if p.is_dir() and p.name != "__pycache__"):
            inside = folder.relative_to(tests)
            if len(inside.parts) > 1 and not any(folder.glob("*.py")):
                continue
            if not (root / package / inside / "__init__.py").is_file():
                found.append(str(folder.relative_to(root)))
    return found


def test_the_tests_follow_the_rooms() -> None:
    """``tests/<package>/<room>/`` holds the tests of ``<package>/<room>/`` (the package's own modules and
    what cuts across rooms are tested in ``tests/<package>/``), so a room renamed or split takes its tests'
    folder along. The test folders have no ``__init__.py``: pytest imports a test module by its file name,
    which is therefore unique under ``tests/`` (pytest refuses a second one)."""
    assert not misplaced_test_folders(ROOT), "test folders that name no room of their package"


def test_the_room_check_sees_a_stray_folder(tmp_path: Path) -> None:
    (tmp_path / "votes" / "reads").mkdir(parents=True)
    (tmp_path / "votes" / "reads" / "__init__.py").write_text("", encoding="utf-8")
    for name in ("reads/test_a.py", "reads/golden/a.json", "readers/test_b.py", "golden/b", "reads/x/c.py"):
        path = tmp_path / "tests" / "votes" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("", encoding="utf-8")
    found = misplaced_test_folders(tmp_path)
    assert found == ["tests/votes/golden", "tests/votes/readers", "tests/votes/reads/x"]


#: Function-local imports, and how many of them still lack their reason. Both may only go down; the aim
#: is under 80 in all, each with its reason as a comment on its line (a heavy library kept off the
#: command line's start-up, a cycle that would otherwise close, ...).
LOCAL_IMPORTS_MAX = 60
LOCAL_IMPORTS_UNEXPLAINED_MAX = 0


def local_imports(path: Path) -> list[tuple[int, bool]]:
    """(line, has a comment on the line) of each import inside a function body of a module."""
    source = path.read_text(encoding="utf-8")
    commented = {
        tok.start[0]
        for tok in tokenize.generate_tokens(io.StringIO(source).readline)
        if tok.type == tokenize.COMMENT
    }
    found = []
    for node in ast.walk(ast.parse(source, filename=str(path))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for inner in ast.walk(node):
                if isinstance(inner, ast.Import | ast.ImportFrom):
                    found.append((inner.lineno, inner.lineno in commented))
    return sorted(set(found))


def test_imports_stay_at_the_top() -> None:
    found = {str(path.relative_to(ROOT)): local_imports(path) for path in package_modules()}
    total = sum(len(lines) for lines in found.values())
    unexplained = {name: [n for n, ok in lines if not ok] for name, lines in found.items()}
    n_unexplained = sum(len(lines) for lines in unexplained.values())
    assert total <= LOCAL_IMPORTS_MAX, f"{total} function-local imports (at most {LOCAL_IMPORTS_MAX})"
    assert n_unexplained <= LOCAL_IMPORTS_UNEXPLAINED_MAX, {k: v for k, v in unexplained.items() if v}
    assert (total, n_unexplained) == (LOCAL_IMPORTS_MAX, LOCAL_IMPORTS_UNEXPLAINED_MAX), (
        f"fewer now: lower LOCAL_IMPORTS_MAX and LOCAL_IMPORTS_UNEXPLAINED_MAX to {total} and {n_unexplained}"
    )


def test_the_local_import_check_sees_one_and_its_reason(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "import os\n\n\ndef f() -> None:\n    import json  # kept off start-up\n    from re import sub\n",
        encoding="utf-8",
    )
    assert local_imports(module) == [(5, True), (6, False)]


# -- one table per kind of extension: its words are spelled there and nowhere else ---------------------


@dataclass(frozen=True)
class ExtensionKind:
    """A kind of extension: the module holding its table, and the words the table registers."""

    table: str
    words: frozenset[str]
    #: Whether a word that names a column, field or key (see :func:`names_a_key`) is not a spelling.
    names_are_not_spellings: bool = False


def extension_kinds() -> dict[str, ExtensionKind]:
    """The tables as they are when the test runs (a rater or format a test adds is among them)."""
    return {
        "rater": ExtensionKind("leaderboard/online/table.py", frozenset(RATERS)),
        "format": ExtensionKind("votes/files/formats.py", frozenset(SOURCE_FORMATS)),
        # `model_a` and `model_b` also name the battle format's two model columns, and `tie` is a word of
        # other vocabularies too (the both-bad option, a judge's verdict): where a constant names a
        # column, field or key it is not an outcome.
        "outcome": ExtensionKind("leaderboard/data.py", frozenset(OUTCOME_STRINGS.values()), True),
        # `ratings` also names the live ratings of a vote's answer and a table column: a key, not a figure
        "figure": ExtensionKind("leaderboard/snapshot/figures.py", frozenset(FIGURES), True),
    }


#: Modules that spell a word of a table outside it, which words, and why. Like the lists above it may
#: only shrink: an entry that no longer spells its words must leave.
SPELLED_ELSEWHERE: dict[str, dict[str, frozenset[str]]] = {
    "rater": {
        # evaluate's own `elo` row (and kind): the live board's plain Elo among the held-out methods (its
        # spec and the list of rows in methods.py, its forecaster in held_out.py)
        "leaderboard/evaluation/held_out.py": frozenset({"elo"}),
        "leaderboard/evaluation/methods.py": frozenset({"elo"}),
        # the vote writer's handshake carries the Elo config it was started with under this field
        "votes/voting/writer/wire.py": frozenset({"elo"}),
    },
    "format": {
        # a judge prompt template (BUILTIN_TEMPLATES) named after arena-hard, not its battle files
        "arena/llm/judging.py": frozenset({"arena-hard"}),
        "arena/cli/commands/judge.py": frozenset({"arena-hard"}),
    },
    "outcome": {
        # the battle-format mappers read other formats' own outcome values and write Chatbot Arena's
        "votes/files/formats.py": frozenset({"model_a", "model_b", "tie"}),
        # the both-bad option `tie` (a both-bad vote counts as a tie) of the fit and its command line
        "leaderboard/bt/spec.py": frozenset({"tie"}),
        "leaderboard/bt/fit.py": frozenset({"tie"}),
        "leaderboard/bt/request.py": frozenset({"tie"}),
        "arena/cli/commands/runs/fit_request.py": frozenset({"tie"}),
        "arena/cli/commands/publish.py": frozenset({"tie"}),
        "arena/cli/commands/recompute.py": frozenset({"tie"}),
        # the judges' own verdict word (`[[tie]]`, or `[[C]]` read as one) in the text they answer
        "arena/llm/judging.py": frozenset({"tie"}),
    },
    "figure": {
        # `bootstrap` the interval kind (percentile intervals from resampled votes), not the figure
        "leaderboard/result.py": frozenset({"bootstrap"}),
        "leaderboard/bt/compute.py": frozenset({"bootstrap"}),
        "leaderboard/composite/board.py": frozenset({"bootstrap"}),
        "leaderboard/bt/request.py": frozenset({"bootstrap"}),
        "arena/publish/recompute.py": frozenset({"bootstrap"}),
        "arena/cli/commands/publish.py": frozenset({"bootstrap"}),
        "arena/cli/commands/recompute.py": frozenset({"bootstrap"}),
    },
}


def _docstrings(tree: ast.Module) -> set[int]:
    """The ``id`` of every docstring constant of a module: prose, not a spelling."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def names_a_key(node: ast.Constant, parent: ast.AST | None, words: frozenset[str]) -> bool:
    """Whether a constant names a column, field or key: a subscript (``row["model_a"]``), a dict key, a
    positional argument (``row.get("model_a")``, ``.label("model_a")``), the key an ``in`` looks for, or one
    name among other names (``("model_a", "model_b", "winner")``, ``("model_a", pa.string())``)."""
    if isinstance(parent, ast.Subscript):
        return parent.slice is node
    if isinstance(parent, ast.Dict):
        return any(key is node for key in parent.keys)
    if isinstance(parent, ast.Call):
        return any(arg is node for arg in parent.args)
    if isinstance(parent, ast.Compare):
        return parent.left is node and all(isinstance(op, ast.In | ast.NotIn) for op in parent.ops)
    if isinstance(parent, ast.Tuple | ast.List | ast.Set):
        return any(not (isinstance(e, ast.Constant) and e.value in words) for e in parent.elts)
    return False


def spellings(path: Path, kind: ExtensionKind) -> list[tuple[int, str]]:
    """(line, word) of each string constant of a module that spells a word of ``kind`` (docstrings aside)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    docstrings = _docstrings(tree)
    parents = {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
            continue
        if node.value not in kind.words or id(node) in docstrings:
            continue
        if kind.names_are_not_spellings and names_a_key(node, parents.get(id(node)), kind.words):
            continue
        found.append((node.lineno, node.value))
    return sorted(set(found))


def test_extension_words_are_spelled_in_their_table_only() -> None:
    """A rater name, a battle format name, an outcome string or a figure stem written outside its table is a
    second place to change when the table changes: every reader takes the words from the table."""
    spelled: dict[str, dict[str, set[str]]] = {}
    for name, kind in extension_kinds().items():
        for path in package_modules():
            module = str(path.relative_to(ROOT))
            words = {word for _, word in spellings(path, kind)} if module != kind.table else set()
            if words:
                spelled.setdefault(name, {})[module] = words
    outside = {
        name: {
            module: sorted(words - SPELLED_ELSEWHERE.get(name, {}).get(module, frozenset()))
            for module, words in modules.items()
        }
        for name, modules in spelled.items()
    }
    outside = {name: {m: w for m, w in modules.items() if w} for name, modules in outside.items()}
    assert not any(outside.values()), f"extension words outside their table (read them from it): {outside}"
    stale = {
        (name, module, word)
        for name, modules in SPELLED_ELSEWHERE.items()
        for module, words in modules.items()
        for word in words
        if word not in spelled.get(name, {}).get(module, set())
    }
    assert not stale, f"no longer spelled there: take them off SPELLED_ELSEWHERE: {sorted(stale)}"


def test_the_spelling_check_sees_a_rater_a_format_and_an_outcome(tmp_path: Path) -> None:
    toy = tmp_path / "toy.py"
    toy.write_text(
        '"""A module that names glicko2 in prose only here."""\n'
        "def pick(name: str, row: dict[str, str]) -> float:\n"
        '    if name == "glicko2":\n'
        '        return {"elo": 1.0}[name]\n'
        '    if row["model_a"] and "model_b" in row and row.get("winner") == "model_b":\n'
        '        return float(name == "arena-hard")\n'
        "    return 0.0\n",
        encoding="utf-8",
    )
    kinds = extension_kinds()
    assert spellings(toy, kinds["rater"]) == [(3, "glicko2"), (4, "elo")]
    assert spellings(toy, kinds["format"]) == [(6, "arena-hard")]
    # the columns read on line 5 are names; the winner compared with model_b there is an outcome
    assert spellings(toy, kinds["outcome"]) == [(5, "model_b")]
