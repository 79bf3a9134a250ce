"""What a message request may carry: images (stored, sent to the model, listed back), and
not both ``input`` and ``messages``."""

# ruff: noqa: F811 (fixtures imported by name are parameters of the same name)

from __future__ import annotations

import letta_client
import pytest
from letta_client import Letta

from stateloop.messages import ImagePart, TextPart
from stateloop.testing.scripted import reply
from test_server_support import Script, client, fake, new_agent, script, server  # noqa: F401 (fixtures)

PIXEL = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAA"
         "SUVORK5CYII=")


def test_input_and_messages_together_are_refused_naming_both(client: Letta,
                                                             script: Script) -> None:
    agent = new_agent(client)
    with pytest.raises(letta_client.UnprocessableEntityError) as caught:
        client.agents.messages.create(agent.id, input="one",
                                      messages=[{"role": "user", "content": "two"}])
    assert "'input' and 'messages'" in str(caught.value.body)
    assert script.requests == []
    assert client.agents.messages.list(agent.id).items[-1].message_type == "system_message"


def test_images_reach_the_model_and_are_listed_back(client: Letta, script: Script) -> None:
    agent = new_agent(client)
    script.set(reply("a cat"), reply("one pixel"))
    client.agents.messages.create(agent.id, messages=[{"role": "user", "content": [
        {"type": "text", "text": "what is this?"},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.png"}}]}])
    sent = script.requests[0].messages[-1]
    assert [type(p) for p in sent.content] == [TextPart, ImagePart]
    assert sent.content[1] == ImagePart("https://example.com/cat.png")

    client.agents.messages.create(agent.id, input=[
        {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                     "data": PIXEL}}])
    [image] = script.requests[1].messages[-1].content
    assert isinstance(image, ImagePart) and image.url == f"data:image/png;base64,{PIXEL}"

    listed = [m for m in client.agents.messages.list(agent.id, order="asc")
              if m.message_type == "user_message"]
    first, second = (m.content for m in listed)  # type: ignore[union-attr]
    assert isinstance(first, list) and isinstance(second, list)
    assert first[0].text == "what is this?"  # type: ignore[union-attr]
    assert first[1].source.url == "https://example.com/cat.png"  # type: ignore[union-attr]
    assert second[0].source.data == PIXEL  # type: ignore[union-attr]
    assert second[0].source.media_type == "image/png"  # type: ignore[union-attr]


def test_an_image_from_an_uploaded_file_is_refused(client: Letta) -> None:
    agent = new_agent(client)
    with pytest.raises(letta_client.UnprocessableEntityError):
        client.agents.messages.create(agent.id, input=[
            {"type": "image", "source": {"type": "letta", "file_id": "file-1"}}])
