"""The model call of a step: its request (as the rules and hooks leave it), the stream read
chunk by chunk, and what a failure means — call again after a delay, compact and rebuild
the request after an overflow, or stop. A part of the loop's run (``loop._Run``), kept
apart as its own job."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .errors import ContextWindowExceeded, InvalidResponse, ModelError
from .events import Compaction, ReasoningDelta, StopReason, TextDelta, ToolCallDelta, ToolCallStart
from .hooks import call_hook
from .llm.base import ModelRequest, ModelResponse, StreamItem, ToolChoice, ToolSpec
from .loop_config import Stop
from .memory.compaction import SystemPromptTooLarge
from .messages import Message

if TYPE_CHECKING:
    from .cancellation import CancelScope
    from .loop_config import LoopConfig
    from .tools.rules import ToolRulesSolver

Delta = TextDelta | ReasoningDelta | ToolCallStart | ToolCallDelta  # a stream's items but the last


@dataclass(slots=True)
class Attempt:
    """The tries of a step's model call: what to send, what came back, what went wrong."""

    request: ModelRequest | None = None  # None: to build (at first, and after an overflow)
    response: ModelResponse | None = None  # set once a complete response came
    overflow: ContextWindowExceeded | None = None  # the provider's last complaint
    errors: int = 0  # failed tries since the request was built, each retried after a delay
    overflows: int = 0  # each answered by a compaction
    started_ns: int = 0  # wall clock when the first try began
    first_chunk_ns: int = 0  # wall clock when the first streamed chunk of any try came
    compactions: list[tuple[int, int, Compaction]] = field(default_factory=list)  # (start, end)


class ModelCalls:
    """``_Run``'s model-call methods; the attributes are the run's."""

    config: LoopConfig
    rules: ToolRulesSolver | None
    scope: CancelScope
    transcript: list[Message]
    unsaved: list[Message]
    tool_specs: list[ToolSpec]
    tool_names: list[str]
    parallel: bool
    step_events: bool

    def _fits(self, attempt: Attempt) -> bool:
        """No compaction to consider before this try (``_fit_window`` would do nothing)."""
        if attempt.overflow is not None:
            return False
        context = self.config.context
        return context is None or context.surely_fits(self.transcript, self.tool_specs)

    async def _fit_window(self, attempt: Attempt) -> Compaction | None:
        """Compact before the call when the request would not fit (or the provider said it
        did not); the summary is saved with the step."""
        context, overflow = self.config.context, attempt.overflow
        assert context is not None  # else the request surely fits, and an overflow ends the run
        attempt.overflow, attempt.errors = None, 0
        try:
            if overflow is not None:
                result = await context.compact(self.transcript, self.tool_specs)
            else:
                result = await context.before_call(self.transcript, self.tool_specs)
        except SystemPromptTooLarge as exc:
            raise Stop("context_window_overflow_in_system_prompt", str(exc)) from exc
        if result is not None:
            self.unsaved.append(result.summary)
            return result.event
        if overflow is not None:
            raise Stop("llm_api_error", _describe(overflow, 1) + " (nothing more can be "
                       "moved out of context)")
        return None

    def _request(self) -> ModelRequest:
        """The request as the rules leave it: built without a coroutine, as most steps are."""
        config, rules = self.config, self.rules
        tools, choice, forced = self.tool_specs, "auto", None
        if rules is not None:
            names, choice, forced = rules.next_call(self.tool_names)
            allowed = set(names)
            tools = [spec for spec in tools if spec.name in allowed]
        return ModelRequest(config.build_context(self.transcript), tools, _as_choice(choice),
                            forced, self.parallel, config.max_tokens, config.model_settings)

    async def _hooked_request(self, request: ModelRequest) -> ModelRequest:
        """The request as the hooks that see it leave it."""
        hooks = self.config.hooks
        assert hooks is not None
        if hooks.transform_context:
            changed = await call_hook(hooks.transform_context, request.messages)
            if changed is not None:
                request.messages = changed  # this request only: never persisted
        if hooks.before_model_call:
            request = await call_hook(hooks.before_model_call, request) or request
        return request

    async def _hooked_response(self, response: ModelResponse) -> ModelResponse:
        """The response as the after_model_call hook leaves it."""
        hooks = self.config.hooks
        if hooks is None or not hooks.after_model_call:
            return response
        return await call_hook(hooks.after_model_call, response) or response

    async def _next_chunk(self, stream: AsyncIterator[StreamItem], attempt: Attempt
                          ) -> Delta | None:
        """The stream's next delta for the consumer, or None when the try is over: the
        response is then on ``attempt``, or the try failed and ``attempt`` says what comes
        next. Deltas are passed over when nobody reads events."""
        scope = self.scope
        try:
            while True:
                scope._armed = True  # inline: this runs for every chunk
                try:
                    item = await anext(stream)
                finally:
                    scope._armed = False
                if not attempt.first_chunk_ns:
                    attempt.first_chunk_ns = time.time_ns()
                if not isinstance(item, ModelResponse):
                    if self.step_events:
                        return item
                    continue
                _check_response(item)
                attempt.response = item
                if self.config.context is not None:  # calibrates the next size estimate
                    self.config.context.record_usage(self.transcript, item.usage.input_tokens)
        except StopAsyncIteration:
            return None
        except (asyncio.CancelledError, ModelError) as exc:
            attempt.response = None  # a failed try's answer is not used
            await self._model_failed(exc, attempt)
            return None

    async def _model_failed(self, exc: BaseException, attempt: Attempt) -> None:
        """After a failed try: wait to call again (a transient error), or note the overflow to
        compact for. Raises the Stop that ends the run, and a cancel of the task itself."""
        if isinstance(exc, asyncio.CancelledError):
            if not self.scope.absorb():
                raise exc
            self._check_cancel()
            return
        if isinstance(exc, ContextWindowExceeded):
            attempt.overflows += 1
            if self.config.context is None or attempt.overflows > 2:
                raise Stop("llm_api_error", _describe(exc, 1) + (
                    " (still too long after two compactions)" if attempt.overflows > 2
                    else "")) from exc
            attempt.overflow, attempt.request = exc, None  # compact, then build it again
            return
        assert isinstance(exc, ModelError)
        attempt.errors += 1
        retry = self.config.retry
        if not exc.transient or attempt.errors > retry.retries:
            raise Stop(_stop_reason_for(exc), _describe(exc, attempt.errors)) from exc
        await self._sleep(retry.delay(attempt.errors, exc.retry_after))

    async def _sleep(self, seconds: float) -> None:
        self.scope._armed = True
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            if not self.scope.absorb():
                raise
        finally:
            self.scope._armed = False
        self._check_cancel()

    def _check_cancel(self) -> None:
        stop = self._cancel_stop()
        if stop is not None:
            raise stop

    def _cancel_stop(self) -> Stop | None:
        """The stop for a cancel or the run's timeout, once either has come."""
        reason = self.scope.reason
        if reason is None:
            return None
        return Stop(reason, "the run timed out" if reason == "timeout" else "the run was cancelled")


def _as_choice(choice: str) -> ToolChoice:
    return "required" if choice == "required" else "none" if choice == "none" else "auto"


def _check_response(response: ModelResponse) -> None:
    message = response.message
    if not message.content and not message.tool_calls:
        raise InvalidResponse("the model returned an empty response")


def _stop_reason_for(exc: ModelError) -> StopReason:
    return "invalid_llm_response" if isinstance(exc, InvalidResponse) else "llm_api_error"


def _describe(exc: ModelError, attempts: int) -> str:
    prefix = f"{type(exc).__name__}"
    if exc.status_code is not None:
        prefix += f" (HTTP {exc.status_code})"
    if attempts > 1:
        prefix += f" after {attempts} attempts"
    return f"{prefix}: {exc.message}"
