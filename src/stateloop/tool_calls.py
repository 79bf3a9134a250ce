"""The tool calls of a step: which wait for a human, running the rest (concurrently unless
order matters) and answering every one, also at a cancel. A part of the loop's run
(``loop._Run``), kept apart as its own job.

A call goes through three stages: prepare (a refusal, the arguments, ``before_tool_call``;
an output here answers the call without running it), ``execute_tool`` (whose failures are
already outputs), then finalize (``after_tool_call``, and the rules record it).
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from .approvals import PendingApproval
from .hooks import Blocked, call_hook
from .messages import Message, ToolCall
from .steering import SKIPPED_NOTICE
from .tools import ToolOutput, execute_tool
from .tools.execution import result_message

if TYPE_CHECKING:
    from .cancellation import CancelScope
    from .loop_config import LoopConfig
    from .tools.rules import ToolRulesSolver

CANCELLED_NOTICE = "Tool call was cancelled before it finished."


class ToolCalls:
    """``_Run``'s tool-call methods; the attributes are the run's."""

    config: LoopConfig
    rules: ToolRulesSolver | None
    scope: CancelScope
    run_id: str
    tool_names: list[str]
    parallel: bool
    open_calls: list[ToolCall]  # issued but not yet answered
    outputs: list[ToolOutput | None]  # their outputs so far, in call order
    call_times: dict[str, tuple[int, int]]  # the calls run this step: wall-clock (start, end)

    def append(self, message: Message) -> None: ...

    def _approval_needed(self, calls: list[ToolCall], offered: set[str]) -> PendingApproval | None:
        requested = [call.id for call in calls
                     if self._requires_approval(call.name) and not self._refusal(call, offered)]
        if not requested:
            return None
        state = self.rules.to_state() if self.rules is not None else None
        return PendingApproval(self.run_id, list(calls), requested, state)

    def _requires_approval(self, name: str) -> bool:
        tool = self.config.tools.get(name)
        return (tool is not None and tool.requires_approval) or (
            self.rules is not None and self.rules.requires_approval(name))

    def _refusal(self, call: ToolCall, offered: set[str] | None) -> str | None:
        """Why a call may not run now (rules, or a tool not offered this step), or None."""
        if self.rules is not None:
            return self.rules.check_call(call.name, self.tool_names)
        if offered is not None and call.name not in offered and call.name in self.config.tools:
            return (f"Tool {call.name!r} is not available at this step. Available tools: "
                    f"{', '.join(sorted(offered)) or 'none'}.")
        return None

    async def _run_tools(self, calls: list[ToolCall], offered: set[str] | None,
                         answered: dict[str, ToolOutput] | None) -> list[ToolOutput]:
        """Run a step's calls, concurrently unless order matters; outputs in call order.
        ``answered`` holds calls answered without running them. A cancel answers the calls
        that have not finished; what finished is kept (``self.outputs``, for a cancel that
        reaches the run while they run)."""
        outputs: list[ToolOutput | None] = (
            [answered.get(call.id) for call in calls] if answered else [None] * len(calls))
        self.outputs = outputs
        if calls and self.scope.reason is None:
            self.scope._armed = True
            try:
                batch: list[int] = []
                for index, call in enumerate(calls):
                    if outputs[index] is not None:
                        continue  # answered already: denied, run by the client, cut off
                    tool = self.config.tools.get(call.name)
                    if not self.parallel or (tool is not None and tool.sequential):
                        await self._run_batch(batch, calls, outputs, offered)
                        batch = []
                        await self._run_batch([index], calls, outputs, offered)
                    else:
                        batch.append(index)
                await self._run_batch(batch, calls, outputs, offered)
            except asyncio.CancelledError:
                if not self.scope.absorb():
                    raise
            finally:
                self.scope._armed = False
        return [output or ToolOutput(CANCELLED_NOTICE, True) for output in outputs]

    async def _run_batch(self, indexes: list[int], calls: list[ToolCall],
                         outputs: list[ToolOutput | None], offered: set[str] | None) -> None:
        if self.config.steering.interrupt:  # the user steered: calls not started are skipped
            for i in indexes:
                outputs[i] = ToolOutput(SKIPPED_NOTICE, True)
        elif len(indexes) == 1:
            i = indexes[0]
            outputs[i] = await self._run_one(calls[i], offered)
        elif indexes:
            async def run_into(i: int) -> None:
                outputs[i] = await self._run_one(calls[i], offered)
            await asyncio.gather(*(run_into(i) for i in indexes))

    async def _run_one(self, call: ToolCall, offered: set[str] | None) -> ToolOutput:
        """Prepare (an output here answers the call unrun), execute (a failure is an
        output), finalize. The hooks' stages cost a coroutine only when there are hooks."""
        hooks = self.config.hooks
        prepared = self._prepare(call, offered)
        if hooks is not None and not isinstance(prepared, ToolOutput):
            prepared = await self._before_tool_call(call, prepared)
        if isinstance(prepared, ToolOutput):
            return prepared
        started = time.time_ns()
        output = await execute_tool(call, prepared, self.config.tools, self.config.agent)
        self.call_times[call.id] = (started, time.time_ns())
        if hooks is not None:
            output = await self._after_tool_call(call, output)
        if self.rules is not None:
            self.rules.record_call(call.name, output.text)
        return output

    def _prepare(self, call: ToolCall, offered: set[str] | None) -> ToolOutput | dict[str, Any]:
        """The arguments to run ``call`` with (the rules' prefilled ones win), or the refusal
        that answers it."""
        refusal = self._refusal(call, offered)
        if refusal is not None:
            return ToolOutput(refusal, True)
        arguments = self.config.continuation.arguments(call)
        if self.rules is not None:
            prefilled = self.rules.prefilled_args(call.name)
            if prefilled:
                arguments = {**arguments, **prefilled}
        return arguments

    async def _before_tool_call(self, call: ToolCall, arguments: dict[str, Any]
                                ) -> ToolOutput | dict[str, Any]:
        """The arguments as the hook leaves them, or the output of a blocked call."""
        hook = self.config.hooks.before_tool_call if self.config.hooks else None
        if hook is None:
            return arguments
        verdict = await call_hook(hook, call, arguments)
        if isinstance(verdict, Blocked):
            return ToolOutput(f"Tool call to {call.name!r} was blocked: {verdict.reason}", True)
        return verdict if isinstance(verdict, dict) else arguments

    async def _after_tool_call(self, call: ToolCall, output: ToolOutput) -> ToolOutput:
        """The output as the hook leaves it."""
        hook = self.config.hooks.after_tool_call if self.config.hooks else None
        if hook is None:
            return output
        changed = await call_hook(hook, call, output)
        if isinstance(changed, str):
            return ToolOutput(changed, output.is_error)
        return changed if isinstance(changed, ToolOutput) else output

    def _answer(self, calls: list[ToolCall], outputs: list[ToolOutput]) -> list[Message]:
        """Every call's result, appended before any event about them is yielded: a consumer
        that stops listening midway must not leave a call unanswered."""
        results = [result_message(call, output)
                   for call, output in zip(calls, outputs, strict=True)]
        for result in results:
            self.append(result)
        self.open_calls = []
        return results

    def answer_open_calls(self) -> None:
        """Give every issued but unanswered call its result, keeping those already produced."""
        calls, self.open_calls = self.open_calls, []
        outputs = self.outputs if len(self.outputs) == len(calls) else [None] * len(calls)
        for call, output in zip(calls, outputs, strict=True):
            output = output or ToolOutput(CANCELLED_NOTICE, True)
            self.append(result_message(call, output))
