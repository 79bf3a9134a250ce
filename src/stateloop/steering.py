"""Steering: input for a run in flight, follow-ups, and transient context notes."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Literal

from .messages import Message, user

Delivery = Literal["one", "all"]
SteerMode = Literal["after_batch", "interrupt"]
SKIPPED_NOTICE = "Skipped: the user sent a new message before this call started."


class SteeringQueue:
    """Messages waiting for a run: steering (before the next model call) and follow-ups
    (when the run would otherwise stop). ``delivery`` is one message per step or all."""

    __slots__ = ("delivery", "follow_ups", "interrupt", "steering")

    def __init__(self, delivery: Delivery = "all") -> None:
        self.steering: deque[Message] = deque()
        self.follow_ups: deque[Message] = deque()
        self.delivery: Delivery = delivery
        self.interrupt = False  # skip the calls of the current batch that have not started

    def steer(self, message: Message, mode: SteerMode = "after_batch") -> None:
        self.steering.append(message)
        if mode == "interrupt":
            self.interrupt = True

    def take_steering(self) -> list[Message]:
        self.interrupt = False
        return self._take(self.steering)

    def take_follow_ups(self) -> list[Message]:
        return self._take(self.follow_ups)

    def _take(self, queue: deque[Message]) -> list[Message]:
        if not queue:
            return []
        if self.delivery == "one":
            return [queue.popleft()]
        taken = list(queue)
        queue.clear()
        return taken


def nudge_after_failures(k: int = 3, note: str | None = None
                         ) -> Callable[[list[Message]], list[Message] | None]:
    """A ``Hooks.transform_context`` policy: after ``k`` consecutive failed tool calls, add a
    note (not persisted) telling the model to change its approach."""
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")

    def transform(messages: list[Message]) -> list[Message] | None:
        failures = 0
        for message in reversed(messages):
            if message.role == "tool":
                if not message.is_error:
                    break
                failures += 1
            elif message.role != "assistant":
                break
        if failures < k:
            return None
        text = note or (f"[Automated note] Your last {failures} tool calls failed. Do not "
                        f"repeat them: read the errors, then change your approach.")
        return [*messages, user(text)]

    return transform
