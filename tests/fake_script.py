"""What a shared fake model answers next: one per test module, each test sets its items."""

from __future__ import annotations

import collections
import threading
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
