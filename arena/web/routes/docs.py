"""The API reference at ``/docs``: the OpenAPI schema as a plain, accessible HTML page of the site.

FastAPI's Swagger UI page loads its script and styles from a CDN and starts them with an inline script;
the site's Content-Security-Policy blocks both, and the page has no ``lang``, landmark or h1. This page
is rendered on the server from ``app.openapi()`` instead, in the site's own layout; the machine-readable
schema stays at ``/openapi.json``.

The real Swagger UI (5.x, which reads OpenAPI 3.1) is at ``/docs/swagger``: its script and styles come
from the ``swagger-ui-py`` package (served by the app at ``/docs/swagger/assets``, see
:data:`SWAGGER_ASSETS`; the older ``swagger-ui-bundle`` ships 4.x, which refuses 3.1), started from a static
file of the site, so the CSP stays ``script-src 'self'`` with no inline script. It stays off ``/docs``
because Swagger UI's own markup is not accessible (no landmarks, unlabelled controls), which the site's
accessibility tests check on ``/docs``. ``/redoc`` leads to ``/docs``: no maintained package on PyPI ships
ReDoc's standalone script, and nothing may be fetched from a CDN.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from arena.web.routes.deps import StateDep

__all__ = ["HTTP_METHODS", "SWAGGER_ASSETS", "ApiOperation", "api_operations", "router"]


def _swagger_assets() -> Path:
    """The ``static`` folder of the ``swagger-ui-py`` package, found without running its ``__init__``
    (which loads its framework adapters)."""
    spec = importlib.util.find_spec("swagger_ui")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the swagger-ui-py package is not installed (a dependency of arena)")
    return Path(next(iter(spec.submodule_search_locations))) / "static"


#: Where Swagger UI's files lie (the ``swagger-ui-py`` package); the app serves them as static files.
SWAGGER_ASSETS = _swagger_assets()

router = APIRouter(include_in_schema=False)

HTTP_METHODS = ("get", "post", "put", "patch", "delete")


@dataclass(frozen=True)
class ApiOperation:
    """One operation of the schema, as the reference page lists it."""

    method: str
    path: str
    summary: str
    description: str
    parameters: list[dict[str, Any]] = field(default_factory=list)
    body_types: list[str] = field(default_factory=list)
    responses: list[tuple[str, str]] = field(default_factory=list)

    @property
    def anchor(self) -> str:
        slug = "".join(c if c.isalnum() else "-" for c in self.path).strip("-")
        return f"{self.method.lower()}-{slug}"


def _type_name(schema: dict[str, Any]) -> str:
    """A schema's type in words: ``integer``, ``string or null``, or the referenced model's name."""
    if "type" in schema:
        return str(schema["type"])
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    options = schema.get("anyOf") or schema.get("oneOf") or []
    return " or ".join(_type_name(option) for option in options)


def api_operations(schema: dict[str, Any]) -> dict[str, list[ApiOperation]]:
    """The schema's operations grouped by their first tag (``Other`` when untagged), in schema order."""
    groups: dict[str, list[ApiOperation]] = {}
    for path, item in schema.get("paths", {}).items():
        for method in HTTP_METHODS:
            op = item.get(method)
            if op is None:
                continue
            operation = ApiOperation(
                method=method.upper(),
                path=path,
                summary=op.get("summary", ""),
                description=op.get("description", ""),
                parameters=[
                    {
                        "name": p.get("name", ""),
                        "in": p.get("in", ""),
                        "required": bool(p.get("required")),
                        "type": _type_name(p.get("schema") or {}),
                        "description": p.get("description", ""),
                    }
                    for p in op.get("parameters", [])
                ],
                body_types=sorted((op.get("requestBody") or {}).get("content", {})),
                responses=[(code, r.get("description", "")) for code, r in op.get("responses", {}).items()],
            )
            groups.setdefault((op.get("tags") or ["Other"])[0], []).append(operation)
    return groups


@router.get("/docs", response_class=HTMLResponse)
def api_docs(request: Request, state: StateDep) -> HTMLResponse:
    schema = request.app.openapi()
    context = {"info": schema.get("info", {}), "groups": api_operations(schema)}
    return state.templates.TemplateResponse(request=request, name="pages/api_docs.html", context=context)


@router.get("/docs/swagger", response_class=HTMLResponse)
def swagger_ui(request: Request, state: StateDep) -> HTMLResponse:
    """Swagger UI from the package's files, under the site's CSP (no inline script)."""
    return state.templates.TemplateResponse(request=request, name="pages/api_swagger.html", context={})


@router.get("/redoc")
def redoc() -> RedirectResponse:
    """The other reference address FastAPI users know: the same page, offline and under the CSP."""
    return RedirectResponse("/docs", status_code=308)
