"""OpenAPI: error responses declared from one table, bodies from the edge models (D-31)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel

_DESCRIPTIONS = {
    401: "Missing or unknown API key",
    402: "Tier or quota: upgrade_required (with required_tier) or quota_exceeded",
    403: "Missing permission or scope outside your grants",
    404: "Absent, or not visible to you",
    409: "Conflict (already exists, or the data dir is owned by another process)",
    413: "Body, batch or text over a limit",
    422: "Validation error",
    429: "Rate limited (see Retry-After)",
    503: "Not ready",
    507: "Out of disk space; nothing was written",
}

ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message"],
            "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
            "additionalProperties": True,
        }
    },
}


class _Responses(dict[int, dict[str, Any]]):
    def subset(self, *codes: int) -> dict[int | str, dict[str, Any]]:
        """The listed codes, plus what any route can answer: 404 (a path parameter the router
        cannot match, e.g. with a newline), 429 and 507."""
        return {c: self[c] for c in sorted({*codes, 404, 429, 507})}


ERROR_RESPONSES = _Responses(
    {
        code: {
            "description": desc,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
        }
        for code, desc in _DESCRIPTIONS.items()
    }
)


def body_schema(model: type[BaseModel]) -> dict[str, Any]:
    return {
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": {"$ref": f"#/components/schemas/{model.__name__}"}}
            },
        }
    }


def install_openapi(app: FastAPI, max_top_k: int = 100) -> None:
    from ..schemas import AegisQuery, IngestRequest

    def custom() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = get_openapi(
            title=app.title, version=app.version, routes=app.routes, description=app.description
        )
        comps = schema.setdefault("components", {}).setdefault("schemas", {})
        comps["Error"] = ERROR_SCHEMA
        for model in (AegisQuery, IngestRequest):
            js = model.model_json_schema(ref_template="#/components/schemas/{model}")
            for name, sub in js.pop("$defs", {}).items():
                comps.setdefault(name, sub)
            comps[model.__name__] = js
        # The configured cap, not the model's absolute one, is what a request may send.
        comps["AegisQuery"]["properties"]["top_k"]["maximum"] = max_top_k
        # FastAPI's own 422 component does not describe our error shape: replace it.
        comps.pop("HTTPValidationError", None)
        comps.pop("ValidationError", None)
        for path in schema.get("paths", {}).values():
            for op in path.values():
                resp = op.get("responses", {})
                if "422" in resp:
                    resp["422"] = {
                        "description": _DESCRIPTIONS[422],
                        "content": {
                            "application/json": {"schema": {"$ref": "#/components/schemas/Error"}}
                        },
                    }
        app.openapi_schema = schema
        return schema

    app.openapi = custom  # type: ignore[method-assign]
