"""Compaction: when the context window fills, move the oldest turns out of context.

Cuts fall only where a turn may start — a user message, or an assistant message whose
earlier calls are all answered — so a tool call never loses its result, and the tail
(with any call awaiting approval) always stays. Evicted messages stay in recall.
``summarize`` asks a model for a structured summary that replaces (never stacks on) the
previous one; ``sliding_window`` needs no model and leaves a notice instead.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import orjson

from ..errors import ModelError, StateloopError
from ..events import Compaction
from ..llm.base import Model, ModelRequest, ModelResponse, ToolSpec
from ..llm.tokens import count_tokens, message_tokens
from ..messages import ImagePart, Message, system, user

Strategy = Literal["summarize", "sliding_window"]
SUMMARY_KIND = "summary"

SUMMARIZER_PROMPT = """\
You keep the running summary of a conversation between an AI agent and its user, so the \
agent can continue after older messages leave its context window. Merge the previous \
summary (if any) with the new messages into ONE updated summary, in these sections:

## Goals
## What happened
## Details to keep verbatim (ids, names, file paths, URLs, numbers, dates, code)
## Errors and fixes
## Current state
## Next step

Keep every detail that may matter later, exactly as written. Drop chit-chat. Write only \
the summary."""


class SystemPromptTooLarge(StateloopError):
    """The system prompt and tool definitions alone do not fit the context window."""


@dataclass(slots=True)
class CompactionResult:
    event: Compaction
    summary: Message  # inserted right after the system prompt
    evicted: list[Message]


def is_summary(message: Message) -> bool:
    return message.metadata.get("kind") == SUMMARY_KIND


_definition_tokens: dict[tuple[bytes, str | None], int] = {}


def tool_tokens(tools: list[ToolSpec], model: str | None) -> int:
    """Tokens of the tool definitions as a provider receives them, counted once per tool set
    and model (each run's first step measures them again)."""
    if not tools:
        return 0
    definitions = [t.to_dict() for t in tools]
    try:
        key = (orjson.dumps(definitions), model)  # several times faster than the text counted
    except TypeError:  # what orjson cannot encode
        key = (json.dumps(definitions).encode(), model)
    found = _definition_tokens.get(key)
    if found is None:
        if len(_definition_tokens) >= 64:
            _definition_tokens.clear()
        found = _definition_tokens[key] = count_tokens(json.dumps(definitions), model)
    return found


class ContextManager:
    """Keeps one agent's requests inside its context window.

    Before each model call the request is measured — with the provider's reported input
    tokens from the previous call plus what was added since, or counted when there is no
    such report; never with output tokens. Past ``threshold`` of the window (reserving
    ``reserve`` tokens for the answer) it compacts.
    """

    def __init__(self, *, window: int, reserve: int, model: Callable[[], Model],
                 strategy: Strategy = "summarize", threshold: float = 0.9,
                 keep_fraction: float = 0.5,
                 on_evict: Callable[[list[Message]], None] | None = None) -> None:
        if not 0 < threshold <= 1:
            raise ValueError(f"compaction threshold must be in (0, 1], got {threshold}")
        if not 0 < keep_fraction < 1:
            raise ValueError(f"keep_fraction must be in (0, 1), got {keep_fraction}")
        self.window = window
        self.reserve = reserve
        self.model = model
        self.strategy: Strategy = strategy
        self.threshold = threshold
        self.keep_fraction = keep_fraction
        self.on_evict = on_evict
        self._reported: tuple[Message | None, int, int] = (None, 0, 0)  # last msg, length, tokens

    # -- measuring -----------------------------------------------------------------------

    def count(self, messages: list[Message]) -> int:
        name = self._model_name()
        return sum(message_tokens(m, name) for m in messages)

    def record_usage(self, transcript: list[Message], input_tokens: int) -> None:
        """Remember what the provider said the request it just answered cost."""
        if input_tokens > 0 and transcript:
            self._reported = (transcript[-1], len(transcript), input_tokens)

    def request_tokens(self, transcript: list[Message], tools: list[ToolSpec], *,
                       bound: bool = False) -> int:
        """The next request's input tokens: the last report plus what came after it.

        With ``bound``, what is not counted yet is bounded instead (a token is at least a
        byte), which costs nothing on the hot path and loads no encoding."""
        last, length, reported = self._reported
        if last is not None and length <= len(transcript) and transcript[length - 1] is last:
            new = transcript[length:]
            return reported + (sum(_upper_bound(m) for m in new) if bound else self.count(new))
        if bound:
            return sum(_upper_bound(m) for m in transcript) + _tools_upper_bound(tools)
        return self.count(transcript) + tool_tokens(tools, self._model_name())

    # -- deciding ------------------------------------------------------------------------

    def check_fits(self, transcript: list[Message], tools: list[ToolSpec]) -> None:
        fixed = self.count(transcript[:1]) + tool_tokens(tools, self._model_name())
        if fixed + self.reserve > self.window:
            raise SystemPromptTooLarge(
                f"the system prompt and tool definitions take {fixed} tokens; with "
                f"{self.reserve} reserved for the answer that exceeds the context window "
                f"of {self.window}")

    def surely_fits(self, transcript: list[Message], tools: list[ToolSpec]) -> bool:
        """Whether the next request stays under the threshold by a cheap upper bound (the
        last report plus a bound on what came after it): then ``before_call`` has nothing
        to do, and the loop skips it."""
        return self.request_tokens(transcript, tools, bound=True) <= self._limit()

    def _limit(self) -> float:
        return self.threshold * self.window - self.reserve

    async def before_call(self, transcript: list[Message],
                          tools: list[ToolSpec]) -> CompactionResult | None:
        """Compact first when the request would pass the threshold."""
        if self.surely_fits(transcript, tools):
            return None
        tokens = self.request_tokens(transcript, tools)
        if tokens <= self._limit():
            return None
        self.check_fits(transcript, tools)
        return await self.compact(transcript, tools, tokens_before=tokens)

    async def compact(self, transcript: list[Message], tools: list[ToolSpec], *,
                      tokens_before: int | None = None, everything: bool = False
                      ) -> CompactionResult | None:
        """Evict the oldest turns so the request takes at most ``keep_fraction`` of what
        the window leaves after the system prompt, tools and the reserve (``everything``:
        all of them, as Letta's ``all`` mode); None when nothing can be evicted."""
        before = tokens_before if tokens_before is not None else self.request_tokens(
            transcript, tools)
        start = 2 if len(transcript) > 1 and is_summary(transcript[1]) else 1
        fixed = self.count(transcript[:1]) + tool_tokens(tools, self._model_name())
        budget = max(0, int((self.window - self.reserve - fixed) * self.keep_fraction))
        cut = (cut_all(transcript, start) if everything
               else choose_cut(transcript, start, budget, self.count))
        if cut is None:
            return None
        previous = transcript[1] if start == 2 else None
        evicted = transcript[start:cut]
        hidden = len(evicted) + (int(previous.metadata.get("hidden", 0)) if previous else 0)
        summary = await self._summary(previous, evicted, hidden)
        summary.metadata["hidden"] = hidden
        transcript[1:cut] = [summary]
        if self.on_evict is not None:
            self.on_evict(evicted)
        self._reported = (None, 0, 0)
        after = self.count(transcript) + tool_tokens(tools, self._model_name())
        event = Compaction(before, after, len(evicted),
                           self.strategy if is_summarized(summary) else "sliding_window")
        return CompactionResult(event, summary, evicted)

    # -- summarising ---------------------------------------------------------------------

    async def _summary(self, previous: Message | None, evicted: list[Message],
                       hidden: int) -> Message:
        text = None
        if self.strategy == "summarize":
            text = await self._summarize(previous, evicted)
        if text is None:  # sliding window, or the summarizer failed: a notice, old summary kept
            old = _summary_body(previous) if previous is not None else ""
            text = old + (f"\n(A summary of the {len(evicted)} newest evicted messages is "
                          f"missing; use conversation_search to read them.)" if old else "")
            message = user(
                f"Note: {hidden} earlier messages are out of context; they remain in recall "
                f"memory (use conversation_search to find them).\n{text}".rstrip())
            message.metadata["kind"] = SUMMARY_KIND
            return message
        message = user(f"Note: prior messages ({hidden} earlier messages) have been hidden "
                       f"from view due to conversation memory constraints.\nThe following is "
                       f"a summary of the previous messages:\n{text}")
        message.metadata.update(kind=SUMMARY_KIND, summarized=True)
        return message

    async def _summarize(self, previous: Message | None, evicted: list[Message]) -> str | None:
        model = self.model()
        room = max(1000, int((model.context_window - 1500) * 3))  # characters, roughly
        body = render_for_summary(evicted)[-room:]
        prompt = ""
        if previous is not None:
            prompt += f"<previous_summary>\n{_summary_body(previous)}\n</previous_summary>\n\n"
        prompt += f"<messages>\n{body}\n</messages>"
        request = ModelRequest([system(SUMMARIZER_PROMPT), user(prompt)],
                               max_tokens=min(1500, max(256, self.window // 8)))
        try:
            response = None
            async for item in model.stream(request):
                if isinstance(item, ModelResponse):
                    response = item
        except ModelError:
            return None  # never fail to compact: fall back to the sliding window
        if response is None or not response.message.text.strip():
            return None
        return response.message.text.strip()

    def _model_name(self) -> str | None:
        try:
            return self.model().name
        except Exception:
            return None


def _upper_bound(message: Message) -> int:
    """At least the message's token count, cheaply: a token is at least one byte."""
    if message.token_count is not None:
        return message.token_count
    size = 16
    for part in message.content:
        size += 2000 if isinstance(part, ImagePart) else _bytes(part.text)
    for call in message.tool_calls:
        raw = call.raw_arguments
        size += _bytes(call.name) + 16 + _bytes(
            raw if raw is not None else json.dumps(call.arguments))
    return size


def _bytes(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def _tools_upper_bound(tools: list[ToolSpec]) -> int:
    if not tools:
        return 0
    definitions = [t.to_dict() for t in tools]
    try:
        return len(orjson.dumps(definitions))
    except TypeError:  # what orjson cannot encode
        return len(json.dumps(definitions).encode())


def is_summarized(message: Message) -> bool:
    return bool(message.metadata.get("summarized"))


def _summary_body(message: Message) -> str:
    text = message.text
    marker = "The following is a summary of the previous messages:\n"
    return text.split(marker, 1)[1] if marker in text else text.split("\n", 1)[-1]


def choose_cut(transcript: list[Message], start: int, budget: int,
               count: Callable[[list[Message]], int]) -> int | None:
    """Index of the first message kept: the earliest turn start whose tail fits ``budget``,
    a user message if one fits; the last turn start when none fits. None: nothing to evict."""
    starts = [i for i in range(start + 1, len(transcript)) if _turn_start(transcript, i)]
    if not starts:
        return None
    tail_tokens = {}
    running = 0
    for i in range(len(transcript) - 1, start, -1):
        running += count([transcript[i]])
        tail_tokens[i] = running
    fitting = [i for i in starts if tail_tokens[i] <= budget]
    if not fitting:
        return starts[-1]
    users = [i for i in fitting if transcript[i].role == "user"]
    return users[0] if users else fitting[0]


def cut_all(transcript: list[Message], start: int) -> int | None:
    """Index of the first message kept when every turn goes: none is, but an assistant
    message at the end whose calls still wait for their results (an approval, a client
    tool) stays with them. None: nothing to evict."""
    end = len(transcript)
    if transcript[-1].role == "assistant" and transcript[-1].tool_calls:
        end -= 1
    return end if end > start else None


def _turn_start(transcript: list[Message], index: int) -> bool:
    """A message the kept part may begin with: not a tool result, and not in the middle
    of an assistant message's results."""
    message = transcript[index]
    return message.role in ("user", "assistant")


def render_for_summary(messages: list[Message]) -> str:
    """The evicted messages as plain text for the summarizer."""
    lines = []
    for message in messages:
        if message.role == "tool":
            lines.append(f"[tool result {message.name}{' (error)' if message.is_error else ''}]"
                         f" {message.text[:2000]}")
            continue
        if message.text:
            lines.append(f"[{message.role}] {message.text}")
        for call in message.tool_calls:
            lines.append(f"[tool call] {call.name}({json.dumps(call.arguments)[:2000]})")
    return "\n".join(lines)
