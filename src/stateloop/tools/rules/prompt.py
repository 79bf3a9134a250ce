"""The tool rules as the system prompt states them: each rule's ``prompt_template``, or
Letta's default line for its type."""

from __future__ import annotations

import re

from .kinds import BaseToolRule

_DEFAULT_TEXT: dict[str, str] = {
    "run_first": "{{ tool_name }} must be called first",
    "exit_loop": "{{ tool_name }} ends your response (yields control) when called",
    "continue_loop": "{{ tool_name }} requires continuing your response when called",
    "constrain_child_tools": "After using {{ tool_name }}, you must use one of these tools: "
                             "{{ children }}",
    "conditional": "{{ tool_name }} will determine which tool to use next based on its output",
    "parent_last_tool": "{{ children }} can only be used after {{ tool_name }}",
    "max_count_per_step": "{{ tool_name }}: at most {{ max_count_limit }} use(s) per response",
    "required_before_exit": "{{ tool_name }} must be called before ending the conversation",
}
# The subset of Jinja that Letta's templates used: ``{{ field }}`` and ``{{ field | join(', ') }}``.
_PLACEHOLDER = re.compile(r"\{\{\s*(\w+)\s*(?:\|\s*join\(\s*(['\"])(.*?)\2\s*\)\s*)?\}\}")


def render(rule: BaseToolRule) -> str:
    """One rule's prompt text: its ``prompt_template`` if given, else Letta's default line."""
    if rule.prompt_template:
        template = rule.prompt_template
    elif rule.type in _DEFAULT_TEXT:
        template = f"<tool_rule>\n{_DEFAULT_TEXT[rule.type]}\n</tool_rule>"
    else:
        return ""  # requires_approval: enforced by the runtime, nothing for the model to follow
    fields = rule.model_dump()

    def substitute(match: re.Match[str]) -> str:
        name, separator = match.group(1), match.group(3)
        if name not in fields:
            return match.group(0)
        value = fields[name]
        if isinstance(value, list):
            return (", " if separator is None else separator).join(str(v) for v in value)
        return str(value)

    return _PLACEHOLDER.sub(substitute, template)
