"""Letta's OpenAPI document as a test oracle: a response body checked against the schema the
document declares for that operation (its $refs resolved within the document)."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import jsonschema_rs

from shared_fixtures import LETTA_OPENAPI


@cache
def letta_spec() -> dict[str, Any]:
    spec: dict[str, Any] = json.loads(LETTA_OPENAPI.read_text())
    return spec


def letta_operation(path: str, method: str) -> dict[str, Any]:
    """The document's operation at ``path`` (written with or without its trailing slash)."""
    paths = letta_spec()["paths"]
    found = paths.get(path) or paths[path.rstrip("/") + "/"]
    operation: dict[str, Any] = found[method.lower()]
    return operation


def assert_letta_shape(path: str, method: str, body: Any, status: str = "200") -> None:
    """``body`` is what Letta's document says ``method path`` answers with ``status``."""
    schema = letta_operation(path, method)["responses"][status]["content"][
        "application/json"]["schema"]
    validator = jsonschema_rs.Draft202012Validator(
        {**schema, "components": letta_spec()["components"]})
    problems = [f"{list(e.instance_path)}: {e.message}" for e in validator.iter_errors(body)]
    assert not problems, f"{method.upper()} {path} answered off Letta's schema: {problems[:5]}"
