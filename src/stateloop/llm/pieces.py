"""Wire pieces kept between model calls, so a call encodes only what changed since the last.

A transcript grows at its end: a request's messages are usually the previous request's
plus a few. ``KeptPieces`` keeps the encoded form of each message sent last time and, for
the next request, reuses it for the messages both requests share at their start (compared
by identity, which costs one pointer comparison each) and encodes only the rest.
``JoinedJSON`` keeps JSON pieces already joined, so a body is one copy of kept bytes;
``KeptTurns`` keeps the turns of providers whose turns join messages of one role.
Messages are not edited once they are in a transcript; one that is replaced is a new
object and is encoded anew.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import orjson

from ..messages import Message

Piece = TypeVar("Piece")


def dumps(value: Any) -> bytes:
    """JSON bytes; what orjson refuses (lone surrogates, huge integers) goes through json."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value).encode()


def shared_prefix(kept: list[Message], messages: list[Message], start: int) -> int:
    """How many of ``messages[start:]`` are the same objects as ``kept``, from the start."""
    count = len(kept)
    if count <= len(messages) - start and messages[start:start + count] == kept:
        return count  # the common case, compared in C (identity first)
    shared = 0
    for old, new in zip(kept, messages[start:], strict=False):
        if old is not new:
            break
        shared += 1
    return shared


class KeptPieces(Generic[Piece]):
    """``encode(message)`` of each of ``messages[start:]``, kept from the previous call for
    the messages the two calls share."""

    __slots__ = ("_encode", "_messages", "_pieces", "reused")

    def __init__(self, encode: Callable[[Message], Piece]) -> None:
        self._encode = encode
        self._messages: list[Message] = []
        self._pieces: list[Piece] = []
        self.reused = 0  # how many pieces the last call took from the one before

    def pieces(self, messages: list[Message], start: int = 0) -> list[Piece]:
        """The pieces of ``messages[start:]``; the returned list is the kept one, not a copy."""
        shared = self.reused = shared_prefix(self._messages, messages, start)
        if shared < len(self._messages):
            del self._messages[shared:], self._pieces[shared:]
        encode = self._encode
        for message in messages[start + shared:]:
            self._messages.append(message)
            self._pieces.append(encode(message))
        return self._pieces


class JoinedJSON:
    """JSON values joined with commas (an array's inside), kept between calls: values can
    be dropped from the end and added, each costing only its own bytes."""

    __slots__ = ("_ends", "joined")

    def __init__(self) -> None:
        self.joined = bytearray()
        self._ends: list[int] = []  # where each value ends in ``joined``

    def __len__(self) -> int:
        return len(self._ends)

    def keep(self, count: int) -> None:
        """Drop every value after the first ``count``."""
        if count < len(self._ends):
            del self._ends[count:]
            del self.joined[self._ends[-1] if self._ends else 0:]

    def add(self, value: bytes) -> None:
        if self._ends:
            self.joined += b","
        self.joined += value
        self._ends.append(len(self.joined))


class KeptArray:
    """The inside of the JSON array of ``encode(message)`` for ``messages[start:]``, kept
    between calls like ``KeptPieces``, its bytes already joined."""

    __slots__ = ("_encode", "_json", "_messages")

    def __init__(self, encode: Callable[[Message], bytes]) -> None:
        self._encode = encode
        self._messages: list[Message] = []
        self._json = JoinedJSON()

    def clear(self) -> None:
        """Forget every piece (the encoding changed)."""
        self._messages = []
        self._json = JoinedJSON()

    def inside(self, messages: list[Message], start: int = 0) -> bytearray:
        """``a,b,c`` for ``messages[start:]``; the kept buffer itself, not a copy."""
        shared = shared_prefix(self._messages, messages, start)
        del self._messages[shared:]
        self._json.keep(shared)
        for message in messages[start + shared:]:
            self._messages.append(message)
            self._json.add(self._encode(message))
        return self._json.joined


# A message's encoded parts: its role, its tool results, its other parts (all JSON).
Encoded = tuple[str, list[bytes], list[bytes]]


class KeptTurns:
    """The JSON of a transcript's turns for providers whose turns join the messages of one
    role in a row, tool results first (Anthropic's ``content``, Gemini's ``parts``: the
    ``field``), kept between calls. Only the last turn (which the next message may join) and
    the turns of new messages are assembled again."""

    __slots__ = ("_blocks", "_field", "_starts", "_turns")

    def __init__(self, encode: Callable[[Message], Encoded], field: bytes) -> None:
        self._blocks: KeptPieces[Encoded] = KeptPieces(encode)
        self._field = field
        self._turns = JoinedJSON()
        self._starts: list[int] = []  # the index of each turn's first message

    def turns(self, messages: list[Message], start: int) -> bytearray:
        """The turns of ``messages[start:]``: the inside of the JSON array."""
        entries = self._blocks.pieces(messages, start)
        # A turn is final once the next turn's first message is among the reused ones.
        final = max(0, bisect.bisect_left(self._starts, self._blocks.reused) - 1)
        index = self._starts[final] if final < len(self._starts) else 0
        self._turns.keep(final)
        del self._starts[final:]
        role = ""  # the turn being assembled: its role and its messages' parts
        blocks: list[tuple[list[bytes], list[bytes]]] = []
        for position in range(index, len(entries)):
            entry_role, results, others = entries[position]
            if not results and not others:
                continue
            if entry_role != role:
                if blocks:
                    self._turns.add(self._turn(role, blocks))
                role, blocks = entry_role, []
                self._starts.append(position)
            blocks.append((results, others))
        if blocks:
            self._turns.add(self._turn(role, blocks))
        return self._turns.joined

    def _turn(self, role: str, blocks: list[tuple[list[bytes], list[bytes]]]) -> bytes:
        """One turn's JSON; tool results open their turn."""
        content = [b for results, _ in blocks for b in results]
        content += [b for _, others in blocks for b in others]
        return b'{"role":"%s","%s":[%s]}' % (role.encode(), self._field, b",".join(content))
