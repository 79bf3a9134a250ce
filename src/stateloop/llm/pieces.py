"""Wire pieces kept between model calls, so a call encodes only what changed since the last.

A transcript grows at its end: a request's messages are usually the previous request's
plus a few. ``KeptPieces`` keeps the encoded form of each message sent last time and, for
the next request, reuses it for the messages both requests share at their start (compared
by identity, which costs one pointer comparison each) and encodes only the rest.
``JoinedJSON`` keeps JSON pieces already joined, so a body is one copy of kept bytes.
Messages are not edited once they are in a transcript; one that is replaced is a new
object and is encoded anew.
"""

from __future__ import annotations

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
