"""The interactive chat: a prompt, streamed turns, y/n approvals and slash commands."""

from __future__ import annotations

from rich.markup import escape

from .console import call_text, err, out
from .items import Decision, PendingCall, Session, TurnEnd
from .render import TurnPrinter

HELP = ("/memory  core memory blocks    /context  the context window, message by message\n"
        "/reset   forget the conversation (memory stays)    /quit  leave (or Ctrl-D)")


def read_line(prompt: str) -> str | None:
    """One line from the user; None at end of input (Ctrl-D)."""
    try:
        return out.input(prompt)
    except EOFError:
        out.print()
        return None


def ask_approvals(calls: list[PendingCall]) -> list[Decision] | None:
    """A y/n for each call (``n REASON`` gives a reason); None if the user left."""
    decisions = []
    for call in calls:
        while True:
            answer = read_line(escape(f"approve {call_text(call.name, call.arguments)}? [y/n] "))
            if answer is None:
                return None
            word, _, reason = answer.strip().partition(" ")
            if word.lower() in ("y", "yes"):
                decisions.append(Decision(call.id, True))
                break
            if word.lower() in ("n", "no"):
                decisions.append(Decision(call.id, False, reason.strip() or "the user said no"))
                break
            out.print("answer y or n (n REASON to say why)")
    return decisions


class Chat:
    """A REPL over one session."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.printer = TurnPrinter(out, out, prefix=f"{session.name}> ")

    def run(self) -> None:
        """Prompt until /quit or Ctrl-D."""
        out.print(f"[bold]{escape(self.session.name)}[/] — type a message; /help for "
                  "commands, /quit or Ctrl-D to leave")
        pending = self.session.pending()
        if pending:
            out.print("[yellow]this agent is waiting for a tool approval[/]")
            if not self.answer(pending):
                return
        while True:
            try:
                line = read_line("you> ")
            except KeyboardInterrupt:
                out.print("\n(/quit or Ctrl-D to leave)")
                continue
            if line is None:
                return
            text = line.strip()
            if not text:
                continue
            if text.startswith("/"):
                if not self.command(text):
                    return
                continue
            end = self.session.turn(text, on_item=self.printer.show)
            if not self.settle(end):
                return

    def settle(self, end: TurnEnd) -> bool:
        """Finish a turn, asking for approvals while the run waits; False if the user left."""
        self.printer.finish(end)
        if end.stop_reason == "requires_approval":
            return self.answer(end.pending)
        return True

    def answer(self, calls: list[PendingCall]) -> bool:
        decisions = ask_approvals(calls)
        if decisions is None:
            out.print("[yellow]left waiting for approval; answer it next time[/]")
            return False
        end = self.session.turn(None, decisions=decisions, on_item=self.printer.show)
        return self.settle(end)

    def command(self, text: str) -> bool:
        """Run a slash command; False means leave."""
        name = text.split()[0].lower()
        if name in ("/quit", "/exit", "/q"):
            return False
        if name == "/help":
            out.print(HELP)
        elif name == "/memory":
            self.show_memory()
        elif name == "/context":
            out.print(self.session.context_view(), markup=False)
        elif name == "/reset":
            self.session.reset()
            out.print("conversation cleared; memory blocks kept")
        else:
            err.print(f"unknown command {escape(name)}; /help lists them")
        return True

    def show_memory(self) -> None:
        blocks = self.session.blocks()
        if not blocks:
            out.print("(no memory blocks)")
        for label, value in blocks:
            out.print(f"[bold]\\[{escape(label)}][/]")
            out.print(value if value else "[dim](empty)[/]", markup=not value)
