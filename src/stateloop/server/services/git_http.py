"""git's smart HTTP protocol for memory repositories, by dulwich's protocol handlers: the ref
advertisement, ``git-upload-pack`` (clone, fetch, pull) and ``git-receive-pack`` (push).

Each request works on an in-memory copy of the agent's repository read from the store
(``MemoryRepo``), in a worker thread, so pack work never runs on the event loop. A push is
checked before dulwich unpacks it (``check_pack``: its size, its object count, each object's
size, without inflating more than that), then stored by ``on_push`` as one transaction that
validates the whole new tree first (store/memory_push.py); what it refuses is the message
git prints after ``remote rejected``.
"""

from __future__ import annotations

import gzip
import io
import struct
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from dulwich.object_store import MemoryObjectStore
from dulwich.objects import ObjectID, ShaFile
from dulwich.protocol import ReceivableProtocol
from dulwich.refs import Ref
from dulwich.repo import MemoryRepo
from dulwich.server import DictBackend, ReceivePackHandler, UploadPackHandler

from ...store.memory_push import PushRefused

BRANCH = b"refs/heads/main"
UPLOAD, RECEIVE = "git-upload-pack", "git-receive-pack"


@dataclass(frozen=True, slots=True)
class GitLimits:
    """What one push may hold: objects, bytes of any one object, bytes in all."""

    max_objects: int = 10_000
    max_object_bytes: int = 1024 * 1024
    max_total_bytes: int = 64 * 1024 * 1024


class StoredObjects(MemoryObjectStore):
    """The objects of a repository as the store holds them, parsed when first asked for
    (a clone reads most as raw data only), and the objects a push adds."""

    def __init__(self, objects: Iterable[tuple[bytes, int, bytes]]) -> None:
        super().__init__()
        self._raw = {sha: (kind, data) for sha, kind, data in objects}
        self.stored = self._raw.keys()  # the shas the store holds already
        self._parsed: dict[bytes, ShaFile] = {}

    def contains_loose(self, sha: Any) -> bool:
        return self._to_hexsha(sha) in self._raw or super().contains_loose(sha)

    def __iter__(self) -> Iterator[Any]:
        yield from self._raw
        yield from self._data

    def get_raw(self, name: Any) -> tuple[int, bytes]:
        found = self._raw.get(self._to_hexsha(name))
        return found if found is not None else super().get_raw(name)

    def __getitem__(self, name: Any) -> ShaFile:
        sha = self._to_hexsha(name)
        parsed = self._parsed.get(sha)
        if parsed is not None:
            return parsed
        found = self._raw.get(sha)
        if found is None:
            return self._data[sha]  # never changed here: no copy needed
        parsed = self._parsed[sha] = ShaFile.from_raw_string(found[0], found[1], sha=sha)
        return parsed

    def pushed(self) -> list[ShaFile]:
        """The objects added since the store's were read."""
        return [obj for sha, obj in self._data.items() if sha not in self._raw]

    def view(self) -> Mapping[bytes, ShaFile]:
        """Every object by sha, as a read-only mapping."""
        return _View(self)


class _View(Mapping[bytes, ShaFile]):
    def __init__(self, store: StoredObjects) -> None:
        self._store = store

    def __getitem__(self, sha: bytes) -> ShaFile:
        return self._store[sha]

    def __iter__(self) -> Iterator[bytes]:
        return iter(self._store)

    def __len__(self) -> int:
        return sum(1 for _ in self._store)


def repository(head: str, objects: Iterable[tuple[bytes, int, bytes]]) -> MemoryRepo:
    """An in-memory repository holding these objects (sha, type, data), its branch ``main``
    at ``head``."""
    repo = MemoryRepo()
    repo.object_store = StoredObjects(objects)
    repo.refs.set_symbolic_ref(Ref(b"HEAD"), Ref(BRANCH))
    repo.refs[Ref(BRANCH)] = ObjectID(head.encode())
    return repo


def advertise(repo: MemoryRepo, service: str) -> bytes:
    """The answer to ``GET info/refs?service=...``."""
    out = io.BytesIO()
    proto = ReceivableProtocol(io.BytesIO().read, out.write)
    proto.write_pkt_line(b"# service=" + service.encode() + b"\n")
    proto.write_pkt_line(None)
    handler_for(service)(_backend(repo), ["/"], proto, stateless_rpc=True,
                         advertise_refs=True).handle()
    return out.getvalue()


def upload_pack(repo: MemoryRepo, body: bytes) -> bytes:
    """The answer to a ``git-upload-pack`` request: the pack of what the client wants."""
    out = io.BytesIO()
    proto = ReceivableProtocol(io.BytesIO(body).read, out.write)
    UploadPackHandler(_backend(repo), ["/"], proto, stateless_rpc=True).handle()
    return out.getvalue()


# what a push's ref update runs: (repository, old sha, new sha) -> None, or PushRefused
PushFn = Callable[[MemoryRepo, str, str], None]


def receive_pack(repo: MemoryRepo, body: bytes, on_push: PushFn, limits: GitLimits) -> bytes:
    """The answer to a ``git-receive-pack`` request: the pack checked, unpacked into
    ``repo`` and handed to ``on_push``; a refusal is reported for git to print."""
    try:
        check_pack(pack_of(body), limits)
        refused = None
    except PushRefused as exc:
        refused = str(exc)
    out = io.BytesIO()
    proto = ReceivableProtocol(io.BytesIO(body).read, out.write)
    _Receiver(_backend(repo), ["/"], proto, stateless_rpc=True,
              on_push=on_push, refused=refused).handle()
    return out.getvalue()


class _Receiver(ReceivePackHandler):
    """dulwich's receive-pack whose update hook stores the push (or refuses it)."""

    def __init__(self, *args: Any, on_push: PushFn, refused: str | None,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._on_push = on_push
        self._refused = refused

    def _apply_pack(self, refs: Any) -> Any:
        if self._refused is not None:  # the pack is not unpacked: git prints why
            return iter([(b"unpack", self._refused.encode()[:1000])])
        return super()._apply_pack(refs)

    def _on_update(self, ref_name: bytes, old_sha: bytes, new_sha: bytes) -> bytes | None:
        if ref_name != BRANCH:
            return b"only refs/heads/main can be pushed to a memory repository"
        if new_sha == b"0" * 40:
            return b"the main branch of a memory repository cannot be deleted"
        try:
            self._on_push(self.repo, old_sha.decode(), new_sha.decode())  # type: ignore[arg-type]
        except PushRefused as exc:
            return str(exc).replace("\n", " ").encode()[:1000]
        return None


def _backend(repo: MemoryRepo) -> DictBackend:
    return DictBackend({"/": repo})  # type: ignore[arg-type]  # a MemoryRepo serves as one


def handler_for(service: str) -> Any:
    """dulwich's handler class for a service name."""
    return {UPLOAD: UploadPackHandler, RECEIVE: ReceivePackHandler}[service]


def request_body(body: bytes, encoding: str | None, limit: int) -> bytes:
    """The request body, gunzipped when git compressed it, no larger than ``limit``."""
    if encoding in (None, "", "identity"):
        return body
    if encoding not in ("gzip", "x-gzip"):
        raise PushRefused(f"unsupported Content-Encoding {encoding!r}")
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(body)) as unzipped:
            data = unzipped.read(limit + 1)
    except (OSError, EOFError) as exc:
        raise PushRefused(f"the request body is not valid gzip: {exc}") from exc
    if len(data) > limit:
        raise PushRefused(f"the request body unzips to over {limit} bytes")
    return data


def pack_of(body: bytes) -> bytes:
    """The pack after a receive-pack request's commands (pkt-lines up to a flush)."""
    at = 0
    while at + 4 <= len(body):
        try:
            size = int(body[at:at + 4], 16)
        except ValueError as exc:
            raise PushRefused("malformed pkt-line in the push") from exc
        if size == 0:
            return body[at + 4:]
        if size < 4:
            raise PushRefused("malformed pkt-line in the push")
        at += size
    raise PushRefused("the push ends before its commands do")


def check_pack(pack: bytes, limits: GitLimits) -> None:
    """Refuse a pack with too many objects or too many bytes once inflated, inflating each
    object at most to its declared size (a small pack cannot make the server inflate much
    more than it declares: a push bomb stops at the first object over its bound)."""
    if not pack:
        return
    if len(pack) < 12 or pack[:4] != b"PACK":
        raise PushRefused("the push holds no pack")
    count = struct.unpack(">I", pack[8:12])[0]
    if count > limits.max_objects:
        raise PushRefused(f"the push holds {count} objects; the limit is {limits.max_objects}")
    at, total, view = 12, 0, memoryview(pack)
    for _ in range(count):
        kind, size, at = _object_header(pack, at)
        if kind == 6:  # ofs-delta: a base offset
            while at < len(pack) and pack[at] & 0x80:
                at += 1
            at += 1
        elif kind == 7:  # ref-delta: a base sha
            at += 20
        if size > limits.max_object_bytes:
            raise PushRefused(f"an object of the push is {size} bytes; the limit is "
                              f"{limits.max_object_bytes}")
        total += size
        if total > limits.max_total_bytes:
            raise PushRefused(f"the push inflates to over {limits.max_total_bytes} bytes")
        head, at = _inflate(view, at, size)
        if kind in (6, 7):  # a delta states the size of the object it makes
            target = _varint(head, _varint(head, 0)[1])[0]
            if target > limits.max_object_bytes:
                raise PushRefused(f"an object of the push is {target} bytes; the limit is "
                                  f"{limits.max_object_bytes}")


_WINDOW = 64 * 1024


def _inflate(view: memoryview, at: int, size: int) -> tuple[bytes, int]:
    """Inflate the object data at ``at``, never to more than ``size`` + 1 bytes: its first
    bytes and where the next object starts."""
    inflate = zlib.decompressobj()
    produced, head = 0, b""
    while not inflate.eof:
        if at >= len(view):
            raise PushRefused("the pack ends early")
        chunk = view[at:at + _WINDOW]
        at += len(chunk)
        pending: bytes | memoryview = chunk
        while pending and not inflate.eof:
            try:
                out = inflate.decompress(pending, size + 1 - produced)
            except zlib.error as exc:
                raise PushRefused(f"an object of the push does not inflate: {exc}") from exc
            produced += len(out)
            if produced > size:
                raise PushRefused("an object of the push is larger than it declares")
            if len(head) < 32:
                head += out[:32]
            pending = inflate.unconsumed_tail
    if produced != size:
        raise PushRefused("an object of the push is smaller than it declares")
    return head, at - len(inflate.unused_data)


def _object_header(pack: bytes, at: int) -> tuple[int, int, int]:
    if at >= len(pack):
        raise PushRefused("the pack ends early")
    byte = pack[at]
    kind, size, shift = (byte >> 4) & 7, byte & 15, 4
    at += 1
    while byte & 0x80:
        if at >= len(pack) or shift > 56:
            raise PushRefused("malformed object header in the pack")
        byte = pack[at]
        size |= (byte & 0x7F) << shift
        shift += 7
        at += 1
    return kind, size, at


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while at < len(data):
        byte = data[at]
        value |= (byte & 0x7F) << shift
        shift += 7
        at += 1
        if not byte & 0x80:
            break
    return value, at
