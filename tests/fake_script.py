"""What a shared fake model answers next: one per test module, each test sets its items."""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable

from stateloop.llm.base import ModelRequest
from stateloop.testing.scripted import ScriptItem, reply

Step = ScriptItem | Callable[[ModelRequest], ScriptItem]


class Script:
    """Items (or functions of the request) the fake model plays in order; it records every
    request, and answers "(script exhausted)" past the end."""

    def __init__(self) -> None:
        self.items: collections.deque[Step] = collections.deque()
        self.requests: list[ModelRequest] = []
        self._lock = threading.Lock()

    def set(self, *items: Step) -> None:
        with self._lock:
            self.items = collections.deque(items)
            self.requests = []

    def __call__(self, request: ModelRequest) -> ScriptItem:
        with self._lock:
            self.requests.append(request)
            item = self.items.popleft() if self.items else reply("(script exhausted)")
        return item(request) if callable(item) else item


def slow(seconds: float, item: ScriptItem) -> Step:
    """An item the fake model takes ``seconds`` to answer: for tests of what time itself does
    (keep-alive pings). A test that needs a run to be in flight holds it with `held`."""

    def answer(request: ModelRequest) -> ScriptItem:
        time.sleep(seconds)
        return item

    return answer


def held(gate: threading.Event, item: ScriptItem, limit: float = 60.0) -> Step:
    """An item the fake model answers only once the test sets ``gate`` (or after ``limit``
    seconds), so a run stays in flight for as long as the test needs, however slow the
    machine. The test sets the gate when done, in a ``finally`` where it may fail first."""

    def answer(request: ModelRequest) -> ScriptItem:
        gate.wait(limit)
        return item

    return answer
