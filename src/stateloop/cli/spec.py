"""What ``agents create`` asks for, parsed from the command line."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .exits import USAGE, CliError

DEFAULT_MODEL = "openai/gpt-4o-mini"
DEFAULT_SYSTEM = "You are a helpful assistant with a persistent memory."
DEFAULT_BLOCKS = (("human", ""), ("persona", "I am a helpful assistant."))


@dataclass(slots=True)
class AgentSpec:
    """A new agent: name, model, system prompt, memory blocks, tags, approval-gated tools."""

    name: str
    model: str = DEFAULT_MODEL
    system: str = DEFAULT_SYSTEM
    blocks: list[tuple[str, str]] = field(default_factory=lambda: list(DEFAULT_BLOCKS))
    tags: list[str] = field(default_factory=list)
    approve: list[str] = field(default_factory=list)  # tools that wait for a human
    agent_type: str = "letta_v1_agent"
    context_window: int | None = None  # None: the model's known window, else the default

    def tool_rules(self) -> list[dict[str, Any]]:
        """Letta's JSON rules for the tools that need approval."""
        return [{"type": "requires_approval", "tool_name": name} for name in self.approve]


def text_or_file(value: str, option: str) -> str:
    """``value`` itself, or the contents of the file it names as ``@PATH``."""
    if not value.startswith("@"):
        return value
    path = Path(value[1:]).expanduser()
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CliError(f"{option}: cannot read {str(path)!r}: {exc.strerror}", USAGE) from exc


def parse_blocks(values: list[str]) -> list[tuple[str, str]]:
    """``--block LABEL=VALUE`` (or ``LABEL=@FILE``) options as (label, value) pairs."""
    blocks: list[tuple[str, str]] = []
    for raw in values:
        label, sep, value = raw.partition("=")
        label = label.strip()
        if not sep or not label:
            raise CliError(f"--block {raw!r}: expected LABEL=VALUE, e.g. --block human='Ada'",
                           USAGE)
        if any(label == seen for seen, _ in blocks):
            raise CliError(f"--block: label {label!r} is given twice", USAGE)
        blocks.append((label, text_or_file(value, f"--block {label}")))
    return blocks
