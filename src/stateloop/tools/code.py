"""Letta's code tools: ``run_code`` runs a program in the source tools' sandbox (its limits,
no network unless allowed); ``run_code_with_tools`` is refused, with the reason.

A call runs ``code_child.py`` as a sandboxed tool, which runs the program as a child process
and answers as Letta's code interpreter does: a JSON object with ``results`` (Python's last
expression), ``logs.stdout``, ``logs.stderr`` and, when the program failed, ``error``.
A language whose runtime is not installed is an error naming what to install.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Literal

from .base import Tool
from .execution import ToolOutput
from .pool import WorkerPool
from .sandbox import Isolation, SandboxLimits, sandboxed_tool, share_workers

Language = Literal["python", "js", "ts", "r", "java"]

_RUNNER = "run_code_program"
_RUNNER_SCHEMA = {"name": _RUNNER, "description": "Run a program.",
                  "parameters": {"type": "object", "required": ["code", "language", "seconds"],
                                 "properties": {"code": {"type": "string"},
                                                "language": {"type": "string"},
                                                "seconds": {"type": "number"}}}}


@functools.cache
def _runner_source() -> str:
    return Path(__file__).with_name("code_child.py").read_text(encoding="utf-8")


def program_seconds(limits: SandboxLimits) -> float:
    """How long the program itself may run: the call's time less a margin to report it."""
    return max(1.0, limits.timeout * 0.8 - 1.0)


def code_runner(limits: SandboxLimits, isolation: Isolation,
                pool: WorkerPool | None = None) -> Tool:
    """The sandboxed tool that runs programs, with these limits and this isolation."""
    return sandboxed_tool(_runner_source(), _RUNNER_SCHEMA, limits=limits, isolation=isolation,
                          pool=pool)


async def run_program(runner: Tool, code: str, language: str, seconds: float) -> str:
    """Letta's JSON report of running ``code``; a failure to run it at all raises."""
    assert runner.function is not None and runner.arguments_model is not None
    fields = runner.arguments_model.model_validate(
        {"code": code, "language": language, "seconds": seconds})
    reply = await runner.function(**fields.__dict__)
    return reply.text if isinstance(reply, ToolOutput) else str(reply)


async def run_code(code: str, language: Language) -> str:
    """Run code in a sandbox. Supports Python, Javascript, Typescript, R, and Java.

    Args:
        code: The code to run.
        language: The language of the code.
    """
    limits = SandboxLimits()
    return await run_program(code_runner(limits, Isolation()), code, language,
                             program_seconds(limits))


def run_code_with_tools(code: str) -> str:
    """Run code with access to the tools of the agent. Only support python.
    You can directly invoke the tools of the agent in the code.

    Args:
        code: The python code to run.
    """
    raise NotImplementedError(
        "run_code_with_tools is not available on this server: calling an agent's tools from "
        "inside sandboxed code would give that code the server's API. Use run_code for the "
        "code, and call the tools directly.")


def server_code_tool(limits: SandboxLimits, isolation: Isolation,
                     pool: WorkerPool | None) -> Tool:
    """``run_code`` as the server binds it for one agent: the server's limits and isolation,
    warm workers of its own (in ``pool``; ``stop_workers`` stops them)."""
    runner = code_runner(limits, isolation, pool)
    seconds = program_seconds(limits)

    async def call(code: str, language: str) -> str:
        return await run_program(runner, code, language, seconds)

    spec = Tool.from_function(run_code)
    tool = Tool(spec.name, spec.description, spec.parameters, call,
                arguments_model=spec.arguments_model, timeout=runner.timeout,
                return_char_limit=spec.return_char_limit)
    share_workers(runner, tool)
    return tool
