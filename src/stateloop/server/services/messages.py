"""Our messages and events as Letta's message objects (``message_type``, ``date``, ...)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ...events import AnyEvent, RunEnd, StepStart
from ...messages import ImagePart, Message, TextPart, ToolCall
from ...persistence import run_status
from ...store.records import step_record_id
from ..models.content import image_view
from ..models.responses import iso

if TYPE_CHECKING:
    from ...agent import Thread
    from ...store.sql import SqlStore

Frame = dict[str, Any]

SEND_MESSAGE = "send_message"  # memgpt agents answer through this tool: shown as text


_HEX = frozenset("0123456789abcdefABCDEF")


def otid(message_id: str, index: int) -> str:
    """The otid of the ``index``-th Letta message one stored message becomes, as Letta
    derives it: the message's UUID with its low 7 bits set to ``index``. Our own ids (a
    per-process prefix and a counter) keep all their bits, shifted above the index, so two
    messages never share an otid; an id that is not hex is hashed first."""
    digits = message_id.partition("-")[2].replace("-", "")
    hexadecimal = all(c in _HEX for c in digits) and digits != ""
    if hexadecimal and len(digits) == 32:
        value = int(digits, 16) & ~0x7F
    elif hexadecimal and len(digits) <= 28:
        value = int(digits, 16) << 7
    else:
        value = uuid.uuid5(uuid.NAMESPACE_OID, message_id).int & ~0x7F
    return str(uuid.UUID(int=value | (index & 0x7F)))


def _base(message_id: str, kind: str, created: float, index: int,
          run_id: str | None) -> Frame:
    return {"id": message_id, "message_type": kind, "date": iso(created),
            "otid": otid(message_id, index), "run_id": run_id, "step_id": None,
            "name": None, "sender_id": None, "is_err": None, "seq_id": None}


def _call(call: ToolCall) -> dict[str, str]:
    arguments = call.raw_arguments if call.raw_arguments is not None else json.dumps(
        call.arguments)
    return {"name": call.name, "arguments": arguments, "tool_call_id": call.id}


def call_frame(message_id: str, calls: list[ToolCall], created: float, index: int,
               run_id: str | None, *, approval: bool = False) -> Frame:
    """A ``tool_call_message`` (or ``approval_request_message``) holding ``calls``, made in
    one step; ``tool_call``, which Letta keeps for older clients, is the first of them."""
    kind = "approval_request_message" if approval else "tool_call_message"
    frame = _base(message_id, kind, created, index, run_id)
    frame["tool_calls"] = [_call(call) for call in calls]
    frame["tool_call"] = frame["tool_calls"][0]
    return frame


def _call_frames(message: Message, first_index: int, run_id: str | None,
                 approvals: set[str], assistant_message: bool) -> list[Frame]:
    """A step's calls as Letta shows them: a run of calls of one kind (run, or awaiting
    approval) is one message; a ``send_message`` call is the assistant's text between
    (with ``assistant_message``; otherwise a call like the others)."""
    frames: list[Frame] = []
    group: list[ToolCall] = []

    def flush() -> None:
        if group:
            frames.append(call_frame(message.id, group.copy(), message.created_at,
                                     first_index + len(frames), run_id,
                                     approval=group[0].id in approvals))
            group.clear()

    for call in message.tool_calls:
        if assistant_message and call.name == SEND_MESSAGE and "message" in call.arguments:
            flush()
            frame = _base(message.id, "assistant_message", message.created_at,
                          first_index + len(frames), run_id)
            frame["content"] = str(call.arguments["message"])
            frames.append(frame)
            continue
        if group and (group[0].id in approvals) != (call.id in approvals):
            flush()
        group.append(call)
    flush()
    return frames


def _shown_result(message: Message, assistant_message: bool) -> bool:
    """A tool result a listing shows (a ``send_message`` result was shown as the assistant's
    message instead)."""
    return message.role == "tool" and not (assistant_message and message.name == SEND_MESSAGE)


def tool_returns_frame(results: Sequence[Message], run_id: str | None) -> Frame:
    """A step's tool results as Letta 0.16.8 shows them: one ``tool_return_message`` whose
    ``tool_returns`` hold every result, the first one's also at the top (for older
    clients), under the first result's id."""
    first = results[0]
    returns = [{"type": "tool", "tool_call_id": m.tool_call_id, "tool_return": m.text,
                "status": "error" if m.is_error else "success",
                "stdout": m.metadata.get("stdout"), "stderr": m.metadata.get("stderr")}
               for m in results]
    frame = _base(first.id, "tool_return_message", first.created_at, 0, run_id)
    frame.update({k: v for k, v in returns[0].items() if k != "type"}, name=first.name,
                 tool_returns=returns)
    return frame


def approval_frame(results: Sequence[Message], run_id: str | None) -> Frame | None:
    """The human's decisions on a paused step's calls, as Letta lists them before the
    step's results: an ``approval_response_message`` (None when no result was decided)."""
    approvals: list[dict[str, Any]] = []
    for message in results:
        decision = message.metadata.get("approval")
        if not isinstance(decision, dict):
            continue
        if decision.get("client"):  # the client ran the tool: its result
            approvals.append({"type": "tool", "tool_call_id": message.tool_call_id,
                              "tool_return": message.text,
                              "status": "error" if message.is_error else "success",
                              "stdout": message.metadata.get("stdout"),
                              "stderr": message.metadata.get("stderr")})
        else:
            approvals.append({"type": "approval", "tool_call_id": message.tool_call_id,
                              "approve": bool(decision.get("approve")),
                              "reason": decision.get("reason")})
    if not approvals:
        return None
    first = results[0]
    # Letta stores the decisions as a message of their own; here they live with the
    # results, so the message's id is derived from the first result's.
    frame_id = f"message-{uuid.uuid5(uuid.NAMESPACE_OID, f'{first.id}:approval')}"
    frame = _base(frame_id, "approval_response_message", first.created_at, 0, run_id)
    decided = next((a for a in approvals if a["type"] == "approval"), None)
    frame.update(approvals=approvals,
                 approve=decided["approve"] if decided else None,
                 approval_request_id=decided["tool_call_id"] if decided else None,
                 reason=decided["reason"] if decided else None)
    return frame


def result_frames(results: Sequence[Message], run_id: str | None,
                  step_id: str | None) -> list[Frame]:
    """One step's results: the decisions that answered them (if any), then the results."""
    decided = approval_frame(results, run_id)
    frames = [*([decided] if decided else []), tool_returns_frame(results, run_id)]
    if step_id is not None:
        for frame in frames:
            frame["step_id"] = step_id
    return frames


async def history_frames(store: SqlStore, stored: Sequence[Message], *,
                         approval_ids: Iterable[str] = (),
                         assistant_message: bool = True) -> list[Frame]:
    """Stored messages as Letta's, each with the run and step that stored it (None when
    those were deleted since): what every message listing answers. A step's results,
    stored one by one, are one message, after the decisions that answered them."""
    origins = await store.message_origins([m.id for m in stored])
    frames: list[Frame] = []
    results: list[Message] = []
    for message in [*stored, None]:
        if results and (message is None or not _shown_result(message, assistant_message)
                        or origins.get(message.id) != origins.get(results[0].id)):
            frames += result_frames(results, *origins.get(results[0].id, (None, None)))
            results = []
        if message is None:
            break
        if _shown_result(message, assistant_message):
            results.append(message)
            continue
        run_id, step_id = origins.get(message.id, (None, None))
        frames += to_letta(message, run_id=run_id, step_id=step_id,
                           approval_ids=approval_ids, assistant_message=assistant_message)
    return frames


def to_letta(message: Message, *, run_id: str | None = None, step_id: str | None = None,
             approval_ids: Iterable[str] = (), assistant_message: bool = True) -> list[Frame]:
    """The Letta messages one stored message becomes (none for a hidden one), with the run
    and step that stored it.

    ``assistant_message`` is Letta's ``use_assistant_message``: ``send_message`` calls shown
    as the assistant's text, their returns left out; without it both are shown as they are.
    """
    frames = _frames(message, run_id, set(approval_ids), assistant_message)
    if step_id is not None:
        for frame in frames:
            frame["step_id"] = step_id
    return frames


def _frames(message: Message, run_id: str | None, approvals: set[str],
            assistant_message: bool) -> list[Frame]:
    created, mid = message.created_at, message.id
    if message.role == "system":
        frame = _base(mid, "system_message", created, 0, run_id)
        frame["content"] = message.text
        return [frame]
    if message.role == "user":
        frame = _base(mid, "user_message", created, 0, run_id)
        frame["content"] = _user_content(message)
        frame["otid"] = message.metadata.get("otid") or frame["otid"]  # the client's own
        return [frame]
    if message.role == "tool":
        if assistant_message and message.name == SEND_MESSAGE:
            return []  # its text was shown as the assistant's message
        return [tool_returns_frame([message], run_id)]
    frames: list[Frame] = []
    if message.reasoning:
        frame = _base(mid, "reasoning_message", created, len(frames), run_id)
        frame.update(reasoning=message.reasoning, source="reasoner_model", signature=None)
        frames.append(frame)
    if message.text:
        frame = _base(mid, "assistant_message", created, len(frames), run_id)
        frame["content"] = message.text
        frames.append(frame)
    return frames + _call_frames(message, len(frames), run_id, approvals, assistant_message)


def _user_content(message: Message) -> str | list[dict[str, Any]]:
    """A user message's text, or (when it holds images) its parts as Letta lists them."""
    if not any(type(part) is ImagePart for part in message.content):
        return message.text
    return [image_view(p) if isinstance(p, ImagePart) else {"type": "text", "text": p.text}
            for p in message.content if isinstance(p, ImagePart | TextPart)]


def end_frames(end: RunEnd) -> list[Frame]:
    """What closes a run's stream: an error (if it failed), the stop reason, the usage."""
    frames: list[Frame] = []
    if end.error and run_status(end.stop_reason) == "failed":
        frames.append({"message_type": "error_message", "run_id": end.run_id,
                       "error_type": end.stop_reason, "message": end.error, "detail": None})
    frames.append({"message_type": "stop_reason", "stop_reason": end.stop_reason})
    frames.append(usage_frame(end))
    return frames


def usage_frame(end: RunEnd) -> Frame:
    usage = end.usage
    return {"message_type": "usage_statistics", "completion_tokens": usage.output_tokens,
            "prompt_tokens": usage.input_tokens, "total_tokens": usage.total_tokens,
            "step_count": end.steps, "run_ids": [end.run_id],
            "cached_input_tokens": usage.cached_input_tokens,
            "cache_write_tokens": usage.cache_write_tokens,
            "reasoning_tokens": usage.reasoning_tokens}


def ping_frame(run_id: str | None) -> Frame:
    return {"message_type": "ping", "id": f"ping-{uuid.uuid4()}", "date": iso(time.time()),
            "run_id": run_id}


_BETWEEN_RESULTS = frozenset({"tool_execution_start", "tool_execution_end"})


def approval_names(agent: Thread) -> set[str]:
    """Tools whose calls pause for a human on this agent."""
    names = {name for name, tool in agent.tools.items() if tool.requires_approval}
    names.update(getattr(rule, "tool_name", "") for rule in agent.tool_rules
                 if getattr(rule, "type", None) == "requires_approval")
    return names


class StreamConverter:
    """Turns a run's events into Letta stream frames.

    Without ``stream_tokens`` each message arrives whole; with it, text, reasoning and tool
    call arguments arrive as chunks, and the whole message is not repeated. As in Letta,
    chunks carry the id, otid and step of the message they become when stored, so a client
    can join them by otid and find them again in the history.
    ``approval_names`` are the tools that pause for a human: their calls become
    ``approval_request_message`` rather than ``tool_call_message``. A step's tool results
    are held until the step's last one and sent as one ``tool_return_message``.
    """

    def __init__(self, *, stream_tokens: bool, approval_names: set[str],
                 assistant_message: bool = True) -> None:
        self.stream_tokens = stream_tokens
        self.approval_names = approval_names
        self.assistant_message = assistant_message
        # With assistant_message, send_message calls are shown as text once whole.
        self._as_text = SEND_MESSAGE if assistant_message else None
        self.run_id: str | None = None
        self._step_id: str | None = None  # none for a step resumed after an approval
        self._reply_id = ""  # the id the step's reply will be stored with
        self._reply: Message | None = None
        # The index (for the otid) of each Letta message the reply becomes, in the order
        # ``to_letta`` gives them: reasoning, text, then each run of calls of one kind.
        self._indices: dict[str, int] = {}
        self._last_group: tuple[bool, int] | None = None  # approval?, index
        self._streamed_calls: dict[int, ToolCall] = {}  # call index -> the call so far
        self._shown_calls: set[str] = set()
        self._results: list[Message] = []  # the step's tool results so far

    def feed(self, event: AnyEvent) -> list[Frame]:
        """The frames ``event`` produces (often none)."""
        kind = event.type
        if kind in _BETWEEN_RESULTS:
            return []
        if kind == "message" and event.message.role == "tool":  # type: ignore[union-attr]
            message = event.message  # type: ignore[union-attr]
            if _shown_result(message, self.assistant_message):
                self._results.append(message)
            return []
        if self._results:  # the decisions that answered them are input: not echoed
            results, self._results = self._results, []
            frame = tool_returns_frame(results, self.run_id)
            frame["step_id"] = self._step_id
            return [frame, *self._feed(event)]
        return self._feed(event)

    def _feed(self, event: AnyEvent) -> list[Frame]:
        kind = event.type
        if kind == "run_start":
            self.run_id = event.run_id  # type: ignore[union-attr]
        elif kind == "step_start":
            assert isinstance(event, StepStart)
            self._reply_id = event.message_id or f"message-{uuid.uuid4()}"
            self._step_id = step_record_id(self.run_id or "", event.step - 1)
            self._reply, self._indices, self._last_group = None, {}, None
            self._streamed_calls = {}
        elif kind == "run_end":
            assert isinstance(event, RunEnd)
            return end_frames(event)
        elif self.stream_tokens and kind in ("text_delta", "reasoning_delta",
                                             "tool_call_start", "tool_call_delta"):
            return self._chunk(event)
        elif kind == "message":
            return self._message(event.message)  # type: ignore[union-attr]
        elif kind == "approval_request":
            return self._approval_request(event.tool_calls)  # type: ignore[union-attr]
        return []

    def _index(self, kind: str) -> int:
        if kind not in self._indices:
            self._indices[kind] = len(self._indices)
        return self._indices[kind]

    def _frame(self, kind: str, index: int) -> Frame:
        frame = _base(self._reply_id, kind, time.time(), index, self.run_id)
        frame["step_id"] = self._step_id
        return frame

    def _chunk(self, event: Any) -> list[Frame]:
        if event.type == "text_delta":
            frame = self._frame("assistant_message", self._index("assistant_message"))
            frame["content"] = event.delta
            return [frame]
        if event.type == "reasoning_delta":
            frame = self._frame("reasoning_message", self._index("reasoning_message"))
            frame.update(reasoning=event.delta, source="reasoner_model", signature=None)
            return [frame]
        if event.type == "tool_call_start":
            call = ToolCall(event.id, event.name, {}, "")
            self._streamed_calls[event.index] = call
            if call.name == self._as_text:
                self._index(f"text:{call.id}")  # shown whole, as its own message
                self._last_group = None
                return []
            self._shown_calls.add(call.id)
            approval = call.name in self.approval_names
            if self._last_group is None or self._last_group[0] != approval:
                self._last_group = (approval, self._index(f"calls:{call.id}"))
            self._indices[call.id] = self._last_group[1]
            return [self._calls_frame(call, approval)]
        started = self._streamed_calls.get(event.index)
        if started is None or started.name == self._as_text:
            return []
        delta = ToolCall(started.id, started.name, {}, event.delta)
        return [self._calls_frame(delta, started.name in self.approval_names)]

    def _calls_frame(self, call: ToolCall, approval: bool) -> Frame:
        frame = call_frame(self._reply_id, [call], time.time(), self._indices[call.id],
                           self.run_id, approval=approval)
        frame["step_id"] = self._step_id
        return frame

    def _message(self, message: Message) -> list[Frame]:
        if message.role == "user":
            return []  # Letta does not echo the input
        if message.role != "assistant":
            return to_letta(message, run_id=self.run_id, step_id=self._step_id,
                            assistant_message=self.assistant_message)
        self._reply = message
        frames = []
        for frame in self._reply_frames(message):
            kind = frame["message_type"]
            if kind in self._indices and frame["otid"] == otid(self._reply_id,
                                                                self._indices[kind]):
                continue  # streamed already
            if kind == "approval_request_message":
                continue  # shown when the approval request comes
            if kind == "tool_call_message":
                # Calls already streamed are left out; the rest stay one message.
                calls = [c for c in frame["tool_calls"]
                         if c["tool_call_id"] not in self._shown_calls]
                if not calls:
                    continue
                self._shown_calls.update(c["tool_call_id"] for c in calls)
                frame.update(tool_calls=calls, tool_call=calls[0])
            frames.append(frame)
        return frames

    def _reply_frames(self, message: Message, approvals: Iterable[str] = ()) -> list[Frame]:
        approvals = {*approvals, *(c.id for c in message.tool_calls
                                   if c.name in self.approval_names)}
        return to_letta(message, run_id=self.run_id, step_id=self._step_id,
                        approval_ids=approvals, assistant_message=self.assistant_message)

    def _approval_request(self, requested: list[ToolCall]) -> list[Frame]:
        """The calls awaiting a human, as the stored reply lists them (less any streamed)."""
        if self._reply is None:  # not seen: the calls alone, under a message id of their own
            calls = [c for c in requested if c.id not in self._shown_calls]
            return [call_frame(f"message-{uuid.uuid4()}", calls, time.time(), 0, self.run_id,
                               approval=True)] if calls else []
        frames = []
        for frame in self._reply_frames(self._reply, (c.id for c in requested)):
            if frame["message_type"] != "approval_request_message":
                continue
            left = [c for c in frame["tool_calls"] if c["tool_call_id"] not in self._shown_calls]
            if left:
                self._shown_calls.update(c["tool_call_id"] for c in left)
                frame.update(tool_calls=left, tool_call=left[0])
                frames.append(frame)
        return frames
