"""Server mode: the same commands against a stateloop (or Letta) server's REST API."""

from __future__ import annotations

import json
from typing import Any

import httpx

from .context_view import overview_text, remote_messages_text
from .exits import NOT_CONFIGURED, USAGE, AmbiguousName, CliError
from .items import (
    Decision,
    PendingCall,
    RawSink,
    Reasoning,
    Sink,
    Text,
    ToolCallShown,
    ToolResultShown,
    TurnEnd,
)
from .spec import AgentSpec


def summary(state: dict[str, Any]) -> dict[str, Any]:
    """Letta's ``AgentState`` with the keys local mode prints."""
    blocks = state.get("blocks") or (state.get("memory") or {}).get("blocks") or []
    return {
        "id": state.get("id"), "name": state.get("name"), "model": state.get("model"),
        "agent_type": state.get("agent_type"), "tags": list(state.get("tags") or []),
        "created_at": state.get("created_at"), "system": state.get("system") or "",
        "blocks": [{"label": b.get("label"), "value": b.get("value", ""),
                    "limit": b.get("limit"), "read_only": bool(b.get("read_only"))}
                   for b in blocks],
        "tools": [t.get("name") for t in state.get("tools") or []],
        "tool_rules": list(state.get("tool_rules") or []),
        "messages_in_context": len(state.get("message_ids") or []),
        "pending_approval": state.get("pending_approval") is not None,
        "last_stop_reason": state.get("last_stop_reason"),
    }


class RemoteBackend:
    """A server at ``url``; ``token`` is sent as a bearer token when given."""

    def __init__(self, url: str, token: str | None = None) -> None:
        self.url = self.server_url = url.rstrip("/")
        # X-Requested-With: a web page could not send it, so the server takes our uploads.
        headers = {"X-Requested-With": "stateloop"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        # Runs can take minutes: no read timeout, but a prompt failure to connect.
        self.http = httpx.Client(base_url=self.url, headers=headers,
                                 timeout=httpx.Timeout(None, connect=10.0))

    def close(self) -> None:
        self.http.close()

    def request(self, method: str, path: str, **options: Any) -> Any:
        """One JSON request; an error status becomes a one-line ``CliError``."""
        try:
            response = self.http.request(method, path, **options)
        except httpx.HTTPError as exc:
            raise CliError(f"cannot reach the server at {self.url}: {exc}",
                           NOT_CONFIGURED) from exc
        check(response)
        return response.json() if response.content else None

    # -- agents ------------------------------------------------------------------------

    def agent_state(self, name: str) -> dict[str, Any]:
        """The agent with this id, or else the one agent of this name (several: an
        ``AmbiguousName`` listing their ids)."""
        if name.startswith("agent-"):
            try:
                found: dict[str, Any] = self.request("GET", f"/v1/agents/{name}")
                return found
            except CliError:
                pass  # maybe a name that looks like an id
        matches = self.request("GET", "/v1/agents", params={
            "name": name, "limit": AmbiguousName.SHOWN + 1, "order": "asc"})
        if not matches:
            raise CliError(f"agent with id or name {name!r} not found on {self.url} "
                           "(`stateloop agents list` shows the agents)", USAGE)
        if len(matches) > 1:
            raise AmbiguousName(name, [(m["id"], m.get("created_at")) for m in matches])
        first: dict[str, Any] = matches[0]
        return first

    def list_agents(self, tags: list[str], *, limit: int,
                    after: str | None = None) -> list[dict[str, Any]]:
        params: dict[str, Any] = {"limit": limit, "order": "asc"}
        if after:
            params["after"] = after
        if tags:
            params["tags"] = tags
        return [summary(s) for s in self.request("GET", "/v1/agents", params=params)]

    def show_agent(self, name: str) -> dict[str, Any]:
        return summary(self.agent_state(name))

    def create_agent(self, spec: AgentSpec) -> dict[str, Any]:
        body: dict[str, Any] = {"name": spec.name, "model": spec.model, "system": spec.system,
                                "agent_type": spec.agent_type, "tags": spec.tags,
                                "memory_blocks": [{"label": label, "value": value}
                                                  for label, value in spec.blocks],
                                "tool_rules": spec.tool_rules()}
        if spec.context_window is not None:
            body["context_window_limit"] = spec.context_window
        return summary(self.request("POST", "/v1/agents", json=body))

    def delete_agent(self, name: str) -> dict[str, Any]:
        state = self.agent_state(name)
        self.request("DELETE", f"/v1/agents/{state['id']}")
        return summary(state)

    def session(self, name: str, *, model: str | None = None, base_url: str | None = None,
                context_window: int | None = None, check: bool = True) -> RemoteSession:
        """Talk to an agent on the server (which has its own model configuration)."""
        if model or base_url or context_window:
            raise CliError("--model, --base-url and --context-window apply to local mode; "
                           "the server uses its own model configuration", USAGE)
        return RemoteSession(self, self.agent_state(name))


class RemoteSession:
    """An agent on a server; turns stream ``POST /v1/agents/{id}/messages/stream``."""

    def __init__(self, backend: RemoteBackend, state: dict[str, Any]) -> None:
        self.backend = backend
        self.id: str = state["id"]
        self.name: str = state.get("name") or self.id

    def turn(self, text: str | None, *, decisions: list[Decision] | None = None,
             on_item: Sink, on_raw: RawSink | None = None) -> TurnEnd:
        """Send ``text`` (or the approval decisions) and follow the run's SSE frames."""
        if decisions:
            message: dict[str, Any] = {"type": "approval", "approvals": [
                {"type": "approval", "tool_call_id": d.tool_call_id, "approve": d.approve,
                 "reason": d.reason} for d in decisions]}
        else:
            message = {"role": "user", "content": text or ""}
        body = {"messages": [message], "stream_tokens": True, "include_pings": False}
        reader = FrameReader(on_item)
        path = f"/v1/agents/{self.id}/messages/stream"
        try:
            with self.backend.http.stream("POST", path, json=body) as response:
                if response.is_error:
                    response.read()
                    check(response)
                for frame in sse_frames(response.iter_lines()):
                    if on_raw is not None:
                        on_raw(frame)
                    reader.feed(frame)
        except KeyboardInterrupt:
            self.backend.request("POST", f"/v1/agents/{self.id}/messages/cancel", json={})
            reader.flush()
            return TurnEnd("cancelled", "cancelled by the user")
        except httpx.HTTPError as exc:
            raise CliError(f"lost the server at {self.backend.url}: {exc}",
                           NOT_CONFIGURED) from exc
        return reader.end()

    def pending(self) -> list[PendingCall]:
        state = self.backend.request("GET", f"/v1/agents/{self.id}")
        pending = state.get("pending_approval")
        if not pending:
            return []
        calls = pending.get("tool_calls") or [pending.get("tool_call")]
        return [PendingCall(c["tool_call_id"], c["name"], c.get("arguments") or "{}")
                for c in calls if c]

    def blocks(self) -> list[tuple[str, str]]:
        state = self.backend.request("GET", f"/v1/agents/{self.id}")
        return [(b["label"], b.get("value", "")) for b in summary(state)["blocks"]]

    def context_data(self) -> dict[str, Any]:
        data: dict[str, Any] = self.backend.request("GET", f"/v1/agents/{self.id}/context")
        return data

    def context_view(self) -> str:
        data = self.context_data()
        return overview_text(data) + "\n\n" + remote_messages_text(data)

    def reset(self) -> None:
        try:
            self.backend.request("PATCH", f"/v1/agents/{self.id}/reset-messages")
        except CliError as exc:
            if "404" in exc.message or "405" in exc.message:
                raise CliError("this server cannot reset an agent's messages", USAGE) from exc
            raise

    def close(self) -> None:
        pass


def check(response: httpx.Response) -> None:
    """Raise a one-line ``CliError`` for an error status, with the server's detail."""
    if not response.is_error:
        return
    try:
        detail = response.json().get("detail")
    except (ValueError, AttributeError):
        detail = None
    if isinstance(detail, list) and all(isinstance(item, dict) for item in detail):
        detail = "; ".join(_field_error(item) for item in detail)
    text = detail if isinstance(detail, str) else json.dumps(detail) if detail else (
        response.text[:200] or response.reason_phrase)
    code = NOT_CONFIGURED if response.status_code in (401, 403) else USAGE
    raise CliError(f"server said {response.status_code}: {text}", code)


def _field_error(item: dict[str, Any]) -> str:
    """One item of FastAPI's 422 list as ``messages.0.content: why`` ("body" left out)."""
    loc = [str(part) for part in item.get("loc") or () if part != "body"]
    return f"{'.'.join(loc)}: {item.get('msg')}" if loc else str(item.get("msg"))


def sse_frames(lines: Any) -> Any:
    """The JSON frames of an SSE body (``data: {...}`` lines, up to ``data: [DONE]``)."""
    for line in lines:
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            return
        if data:
            yield json.loads(data)


class FrameReader:
    """Letta stream frames to items: text as it streams, tool calls once whole."""

    def __init__(self, on_item: Sink) -> None:
        self.on_item = on_item
        self.stop_reason = "error"
        self.error: str | None = None
        self.output: list[str] = []
        self.pending: list[PendingCall] = []
        self._call: dict[str, Any] | None = None  # a call whose arguments are streaming
        self._names: dict[str, str] = {}  # call id -> tool name, for the results

    def feed(self, frame: dict[str, Any]) -> None:
        kind = frame.get("message_type")
        if kind in ("tool_call_message", "approval_request_message"):
            for each in frame.get("tool_calls") or []:
                if each.get("name"):
                    self._names[each.get("tool_call_id")] = each["name"]
            call = frame.get("tool_call") or {}
            if self._call is not None and self._call["id"] != call.get("tool_call_id"):
                self.flush()
            if self._call is None:
                self._call = {"id": call.get("tool_call_id"), "name": call.get("name"),
                              "arguments": "", "approval": kind.startswith("approval")}
            self._call["arguments"] += call.get("arguments") or ""
            return
        self.flush()
        if kind == "assistant_message":
            content = frame.get("content") or ""
            self.output.append(content)
            self.on_item(Text(content))
        elif kind == "reasoning_message":
            self.on_item(Reasoning(frame.get("reasoning") or ""))
        elif kind == "tool_return_message":  # a step's results, one per call
            for result in frame.get("tool_returns") or [frame]:
                name = self._names.get(result.get("tool_call_id")) or frame.get("name")
                self.on_item(ToolResultShown(name or "tool", str(result.get("tool_return") or ""),
                                             result.get("status") == "error"))
        elif kind == "error_message":
            self.error = frame.get("message") or frame.get("detail")
        elif kind == "stop_reason":
            self.stop_reason = frame.get("stop_reason") or "error"

    def flush(self) -> None:
        """Show the call whose arguments were streaming, now that they are complete."""
        call, self._call = self._call, None
        if call is None:
            return
        self.on_item(ToolCallShown(call["id"], call["name"], call["arguments"]))
        if call["approval"]:
            self.pending.append(PendingCall(call["id"], call["name"], call["arguments"]))

    def end(self) -> TurnEnd:
        self.flush()
        pending = self.pending if self.stop_reason == "requires_approval" else []
        return TurnEnd(self.stop_reason, self.error, "".join(self.output), pending)
