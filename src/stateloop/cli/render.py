"""Printing a turn as it streams: text live, tool calls and results one compact line each."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from .console import call_text, shorten
from .items import (
    Item,
    Note,
    Reasoning,
    Text,
    ToolCallShown,
    ToolResultShown,
    TurnEnd,
    failed,
)


class TurnPrinter:
    """Shows items: assistant text on ``text_to`` (after ``prefix``), the rest on ``info_to``."""

    def __init__(self, text_to: Console, info_to: Console, *, prefix: str = "") -> None:
        self.text_to = text_to
        self.info_to = info_to
        self.prefix = prefix
        self._open: Console | None = None  # the console whose line streamed text is on
        self._open_kind: type[Item] | None = None

    def show(self, item: Item) -> None:
        """Print one item as it arrives."""
        if isinstance(item, Text):
            if item.text:
                prefix = f"[bold]{escape(self.prefix)}[/]" if self.prefix else ""
                self._stream(self.text_to, Text, prefix, item.text)
            return
        if isinstance(item, Reasoning):
            if item.text:
                self._stream(self.info_to, Reasoning, "[dim]  thinking: [/]", item.text,
                             style="dim italic")
            return
        self.end_line()
        if isinstance(item, ToolCallShown):
            self.info_to.print(f"[cyan]  → {escape(call_text(item.name, item.arguments))}[/]")
        elif isinstance(item, ToolResultShown):
            style = "red" if item.is_error else "dim"
            self.info_to.print(f"[{style}]  ← {escape(shorten(item.text))}[/]")
        elif isinstance(item, Note):
            self.info_to.print(f"[dim]  ({escape(item.text)})[/]")

    def _stream(self, console: Console, kind: type[Item], prefix: str, text: str,
                style: str | None = None) -> None:
        """Continue (or start, after ``prefix``) a line of streamed text; shown at once."""
        if self._open is not console or self._open_kind is not kind:
            self.end_line()
            if prefix:
                console.print(prefix, end="")
            self._open, self._open_kind = console, kind
        # Deltas are not markup: printed as they are, flushed so they show immediately.
        console.print(text, end="", markup=False, style=style)
        console.file.flush()

    def end_line(self) -> None:
        """Finish the line of streamed text, if one is open."""
        if self._open is not None:
            self._open.print()
            self._open.file.flush()
            self._open = self._open_kind = None

    def finish(self, end: TurnEnd) -> None:
        """Close the turn: a failure or an unusual stop gets one line on ``info_to``."""
        self.end_line()
        if failed(end.stop_reason):
            detail = f": {end.error}" if end.error else ""
            self.info_to.print(f"[bold red]error:[/] run failed ({end.stop_reason})"
                               f"{escape(shorten(detail, 300))}")
        elif end.stop_reason not in ("end_turn", "requires_approval"):
            self.info_to.print(f"[yellow]  (stopped: {end.stop_reason})[/]")
