"""`arena models`: registering OpenAI-compatible endpoints; the key is only ever a variable's name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import text
from typer.testing import CliRunner

from arena.cli.main import app
from arena.llm.registry import config_for, parse_params
from votes.catalog.endpoints import EndpointRecord
from votes.db import make_engine

runner = CliRunner()


def run(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    out = result.output
    try:
        out += result.stderr
    except ValueError:
        pass
    return result.exit_code, out


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/arena.db"


def test_add_list_show_remove(url: str) -> None:
    code, out = run(
        "models", "add", "tiny-a", "--base-url", "http://127.0.0.1:9/v1", "--model", "tiny",
        "--api-key-env", "TINY_KEY", "--param", "temperature=0.5", "--param", "max_tokens=16",
        "--param", "system_prompt=Be brief", "--param", "top_k=3", "--database-url", url,
    )  # fmt: skip
    assert code == 0, out
    code, out = run("models", "list", "--json", "--database-url", url)
    assert code == 0, out
    (row,) = [json.loads(line) for line in out.splitlines()]
    assert row == {
        "name": "tiny-a",
        "base_url": "http://127.0.0.1:9/v1",
        "model": "tiny",
        "api_key_env": "TINY_KEY",
        "params": {"temperature": 0.5, "max_tokens": 16, "system_prompt": "Be brief", "top_k": 3},
        "role": "contestant",
        "active": True,
        "aliases": [],
    }
    code, out = run("models", "show", "tiny-a", "--database-url", url)
    assert code == 0 and json.loads(out)["model"] == "tiny", out
    code, out = run("models", "add", "tiny-a", "--base-url", "http://x/v1", "--database-url", url)
    assert code == 2 and "--replace" in out
    engine = make_engine(url)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT name FROM model")).scalars().all() == ["tiny-a"]
    engine.dispose()
    code, out = run("models", "remove", "tiny-a", "--database-url", url)
    assert code == 0 and "retired, endpoint forgotten" in out, out
    # the endpoint is forgotten; the model stays (its answers and votes), retired
    code, out = run("models", "show", "tiny-a", "--database-url", url)
    assert code == 0, out
    assert json.loads(out) | {"params": None} == {
        "name": "tiny-a", "role": "contestant", "active": False, "aliases": [], "base_url": None,
        "model": None, "api_key_env": None, "params": None,
    }  # fmt: skip
    assert run("models", "list", "--json", "--database-url", url)[1].strip() == ""
    code, out = run("models", "list", "--all", "--database-url", url)
    assert code == 0 and "tiny-a" in out and "retired" in out, out
    code, out = run("models", "remove", "nobody", "--database-url", url)
    assert code == 2 and "no model or endpoint named 'nobody'" in out


def test_a_key_given_as_the_variable_name_is_refused_and_not_echoed(url: str) -> None:
    secret = "sk-live-0123456789abcdef"
    code, out = run(
        "models", "add", "m", "--base-url", "http://h/v1", "--api-key-env", secret, "--database-url", url
    )
    assert code == 2
    assert secret not in out


def test_load_a_toml_file(url: str, tmp_path: Path) -> None:
    path = tmp_path / "models.toml"
    path.write_text(
        '[models.a]\nbase_url = "http://127.0.0.1:1/v1"\nmodel = "tiny"\ntemperature = 0.0\n'
        'max_concurrency = 8\n\n[models.b]\nbase_url = "http://127.0.0.1:2/v1"\n'
        'api_key_env = "B_KEY"\nparams = { seed = 3 }\n',
        encoding="utf-8",
    )
    code, out = run("models", "load", str(path), "--database-url", url)
    assert code == 0, out
    code, out = run("models", "list", "--json", "--database-url", url)
    rows = {r["name"]: r for r in map(json.loads, out.splitlines())}
    assert rows["a"]["params"] == {"temperature": 0.0, "max_concurrency": 8}
    assert rows["b"]["model"] == "b" and rows["b"]["params"] == {"seed": 3}
    code, out = run("models", "load", str(path), "--database-url", url)
    assert code == 2 and "already registered" in out


def test_a_key_written_into_the_file_is_refused(tmp_path: Path, url: str) -> None:
    path = tmp_path / "models.toml"
    path.write_text('[models.a]\nbase_url = "http://h/v1"\napi_key = "sk-secret-value"\n', encoding="utf-8")
    code, out = run("models", "load", str(path), "--database-url", url)
    assert code == 2 and "api_key_env" in out and "sk-secret-value" not in out


def test_params_split_into_client_settings_and_request_body() -> None:
    params = parse_params(["temperature=0.2", "max_concurrency=3", "top_p=0.9", 'stop=["\\n"]', "x=plain"])
    assert params == {"temperature": 0.2, "max_concurrency": 3, "top_p": 0.9, "stop": ["\n"], "x": "plain"}
    config = config_for(EndpointRecord(name="n", base_url="http://h/v1", served_model="s", params=params))
    assert (config.temperature, config.max_concurrency, config.model) == (0.2, 3, "s")
    assert config.extra_params == {"top_p": 0.9, "stop": ["\n"], "x": "plain"}
    with pytest.raises(ValueError, match="key=value"):
        parse_params(["novalue"])


def test_load_sets_roles_and_aliases_in_one_go(url: str, tmp_path: Path) -> None:
    path = tmp_path / "models.toml"
    path.write_text(
        '[models.judge-70b]\nbase_url = "http://127.0.0.1:1/v1"\nrole = "judge"\n\n'
        '[models.widget]\nbase_url = "http://127.0.0.1:2/v1"\naliases = ["Widget Bot", "WB-1"]\n\n'
        '[models.imported]\nrole = "both"\n',
        encoding="utf-8",
    )
    code, out = run("models", "load", str(path), "--database-url", url)
    assert code == 0 and "2 endpoint(s) registered" in out and "role or aliases of 3" in out, out
    code, out = run("models", "list", "--all", "--json", "--database-url", url)
    rows = {r["name"]: r for r in map(json.loads, out.splitlines())}
    assert {n: (r["role"], r["aliases"], r["base_url"] is not None) for n, r in rows.items()} == {
        "imported": ("both", [], False),
        "judge-70b": ("judge", [], True),
        "widget": ("contestant", ["Widget Bot", "WB-1"], True),
    }
    path.write_text('[models.x]\nbase_url = "http://h/v1"\nrole = "umpire"\n', encoding="utf-8")
    code, out = run("models", "load", str(path), "--database-url", url)
    assert code == 2 and "model 'x': unknown role 'umpire'" in out, out
