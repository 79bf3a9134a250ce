"""Letta's own built-in tools (its ``BUILTIN_TOOLS``): web search, page fetch and code.

None is attached by ``include_base_tools``, as in Letta: an agent gets them by name.
"""

from __future__ import annotations

from .code import run_code, run_code_with_tools
from .web_fetch import fetch_webpage
from .web_search import web_search

LETTA_BUILTIN_TOOLS = (run_code, run_code_with_tools, web_search, fetch_webpage)
LETTA_BUILTIN_NAMES = frozenset(f.__name__ for f in LETTA_BUILTIN_TOOLS)
