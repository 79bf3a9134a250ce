"""Routing order: health and sending a message are matched before the other routers (FastAPI
tries included routers one by one), which is safe only while no other route takes a path of
theirs with the same method."""

from __future__ import annotations

import re

from stateloop.server.app import create_app
from stateloop.server.routes import health, messages

SAMPLES = ("agent-1", "messages", "stream", "async", "cancel", "steer", "health", "search",
           "count", "import")


def _pattern(path: str) -> re.Pattern[str]:
    return re.compile("^" + re.sub(r"\{[^}]+\}", "[^/]+", path) + "$")


def _examples(path: str) -> list[str]:
    return [re.sub(r"\{[^}]+\}", sample, path) for sample in SAMPLES]


def test_no_other_route_takes_a_path_of_the_routers_matched_first() -> None:
    schema = create_app().openapi()
    first = {(route.path, method.lower()) for module in (health, messages)
             for route in module.router.routes for method in route.methods}  # type: ignore[attr-defined]
    others = {(path, method) for path, operations in schema["paths"].items()
              for method in operations} - first
    assert first <= {(path, method) for path, operations in schema["paths"].items()
                     for method in operations}
    clashes = []
    for path, method in first:
        for other, other_method in others:
            if method != other_method:
                continue
            if any(_pattern(other).match(p) for p in _examples(path)) or any(
                    _pattern(path).match(p) for p in _examples(other)):
                clashes.append(f"{method.upper()} {path} and {other}")
    assert clashes == []
