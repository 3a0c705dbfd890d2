"""``/docs``: the OpenAPI schema as a page of the site: lang, main landmark, one h1, every operation."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from arena.web.routes.docs import HTTP_METHODS, api_operations


def test_docs_page_lists_every_operation(client: TestClient) -> None:
    response = client.get("/docs")
    schema = client.get("/openapi.json").json()
    assert response.status_code == 200
    assert response.template.name == "pages/api_docs.html"  # type: ignore[attr-defined]
    html = response.text
    assert '<html lang="en">' in html and '<main id="main"' in html
    assert len(re.findall(r"<h1[ >]", html)) == 1
    operations = [op for ops in api_operations(schema).values() for op in ops]
    n_schema = sum(1 for item in schema["paths"].values() for method in item if method in HTTP_METHODS)
    assert operations and len(operations) == n_schema
    for op in operations:
        assert f'id="{op.anchor}"' in html
    assert "swagger" not in html.lower() and "cdn.jsdelivr" not in html


def test_parameter_types_are_named() -> None:
    optional_string = {"anyOf": [{"type": "string"}, {"type": "null"}]}
    schema = {
        "paths": {
            "/x": {
                "get": {
                    "tags": ["t"],
                    "parameters": [
                        {"name": "n", "in": "query", "schema": {"type": "integer"}},
                        {"name": "s", "in": "query", "schema": optional_string},
                    ],
                }
            }
        }
    }
    (operation,) = api_operations(schema)["t"]
    assert [p["type"] for p in operation.parameters] == ["integer", "string or null"]


def test_operation_names_read_as_english_and_redoc_leads_to_the_page(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()
    summaries = {
        (method.upper(), path): op.get("summary", "")
        for path, item in schema["paths"].items()
        for method, op in item.items()
        if method in HTTP_METHODS
    }
    assert summaries[("GET", "/api/battles/next")] == "Next battle"
    assert summaries[("POST", "/api/votes")] == "Cast a vote"
    for summary in summaries.values():  # no function names: "Api Vote", "Admin Flag"
        assert summary and not summary.startswith(("Api ", "Admin ")), summary
    redoc = client.get("/redoc", follow_redirects=False)
    assert redoc.status_code == 308 and redoc.headers["location"] == "/docs"
    assert "Cast a vote" in client.get("/docs").text
