"""The tool calls of a step: which may run, which wait for a human, and running the rest
(concurrently unless order matters), answering every one. A part of the loop's run
(``loop._Run``), kept apart as its own job."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from .approvals import PendingApproval
from .cancellation import CancelScope
from .hooks import Blocked, call_hook
from .messages import ToolCall
from .steering import SKIPPED_NOTICE
from .tools import ToolOutput, execute_tool

if TYPE_CHECKING:
    from .loop import LoopConfig
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
    outputs: list[ToolOutput | None]  # the outputs of the calls running, so far

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
                         verdicts: dict[str, ToolOutput]) -> list[ToolOutput]:
        """Run a step's calls, concurrently unless order matters; outputs in call order.
        ``verdicts`` answers calls without running them. A cancel answers unfinished calls."""
        outputs: list[ToolOutput | None] = [verdicts.get(call.id) for call in calls]
        self.outputs = outputs
        if calls and self.scope.reason is None:
            self.scope._armed = True
            try:
                batch: list[int] = []
                for index, call in enumerate(calls):
                    if outputs[index] is not None:
                        continue  # answered by a human: denied, or run by the client
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
        config, rules, hooks = self.config, self.rules, self.config.hooks
        refusal = self._refusal(call, offered)
        if refusal is not None:
            return ToolOutput(refusal, True)
        arguments = config.continuation.arguments(call)
        if rules is not None:
            prefilled = rules.prefilled_args(call.name)
            if prefilled:
                arguments = {**arguments, **prefilled}
        if hooks and hooks.before_tool_call:
            verdict = await call_hook(hooks.before_tool_call, call, arguments)
            if isinstance(verdict, Blocked):
                return ToolOutput(f"Tool call to {call.name!r} was blocked: {verdict.reason}", True)
            if isinstance(verdict, dict):
                arguments = verdict
        output = await execute_tool(call, arguments, config.tools, config.agent)
        if hooks and hooks.after_tool_call:
            changed = await call_hook(hooks.after_tool_call, call, output)
            if isinstance(changed, str):
                output = ToolOutput(changed, output.is_error)
            elif isinstance(changed, ToolOutput):
                output = changed
        if rules is not None:
            rules.record_call(call.name, output.text)
        return output
