"""A SQLite file that refuses writes, two ways: ``chattr +i`` (root on a filesystem with
file attributes, as on ext4; ``chmod`` does not stop root) and a trigger that aborts every
message insert (anywhere)."""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

WAYS = ("chattr", "trigger")


def chattr_works(folder: Path) -> bool:
    """Whether ``chattr +i`` makes a file of ``folder`` immutable here."""
    if shutil.which("chattr") is None:
        return False
    probe = folder / "chattr-probe"
    probe.write_text("")
    try:
        if subprocess.run(["chattr", "+i", probe], capture_output=True).returncode:
            return False
        try:
            with probe.open("a") as f:
                f.write("x")
        except OSError:
            return True
        return False
    finally:
        subprocess.run(["chattr", "-i", probe], capture_output=True)
        probe.unlink()


def require(way: str, folder: Path) -> None:
    if way == "chattr" and not chattr_works(folder):
        pytest.skip("chattr +i does not make files immutable here (not root, or no support)")


@contextlib.contextmanager
def unwritable(db: Path, way: str) -> Iterator[None]:
    """Writes to ``db`` fail inside the block; they work again after it."""
    if way == "chattr":
        files = [f for f in (db, db.with_name(db.name + "-wal")) if f.exists()]
        for f in files:
            subprocess.run(["chattr", "+i", f], check=True)
        try:
            yield
        finally:
            for f in files:
                subprocess.run(["chattr", "-i", f], check=True)
        return
    with sqlite3.connect(db) as raw:
        raw.execute("CREATE TRIGGER refuse_messages BEFORE INSERT ON messages "
                    "BEGIN SELECT RAISE(ABORT, 'disk on fire'); END")
    try:
        yield
    finally:
        with sqlite3.connect(db) as raw:
            raw.execute("DROP TRIGGER refuse_messages")
