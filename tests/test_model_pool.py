"""Model calls share pooled connections: many agents calling at once reuse them, rather than
opening a new connection (a TLS handshake, against a real provider) for each call."""

from __future__ import annotations

import asyncio

from stateloop.llm.base import ModelRequest, ModelResponse
from stateloop.llm.openai import OpenAIModel
from stateloop.messages import user

CALLS = 40  # at once: more than httpx's default of 20 kept-alive connections
BODY = (b'data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,'
        b'"delta":{"role":"assistant","content":"ok"},"finish_reason":null}]}\n\n'
        b'data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,'
        b'"delta":{},"finish_reason":"stop"}]}\n\n'
        b"data: [DONE]\n\n")
RESPONSE = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"content-length: %d\r\n\r\n" % len(BODY)) + BODY


class Provider:
    """A keep-alive HTTP/1.1 server that answers once ``CALLS`` requests are in (so that
    every call of a round is in flight at once) and counts the connections it accepts."""

    def __init__(self) -> None:
        self.connections = 0
        self.waiting = 0
        self.all_in = asyncio.Event()

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length:"))
                await reader.readexactly(length)
                self.waiting += 1
                if self.waiting == CALLS:
                    self.all_in.set()
                await self.all_in.wait()
                writer.write(RESPONSE)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    def next_round(self) -> None:
        self.waiting = 0
        self.all_in = asyncio.Event()


async def test_concurrent_model_calls_reuse_their_connections() -> None:
    provider = Provider()
    server = await asyncio.start_server(provider.serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    model = OpenAIModel("gpt-4o-mini", base_url=f"http://127.0.0.1:{port}/v1", api_key="test")

    async def one() -> ModelResponse:
        items = [item async for item in model.stream(ModelRequest([user("hi")], []))]
        assert isinstance(items[-1], ModelResponse)
        return items[-1]

    try:
        for _ in range(3):
            responses = await asyncio.wait_for(asyncio.gather(*(one() for _ in range(CALLS))),
                                               30)
            assert [r.message.text for r in responses] == ["ok"] * CALLS
            provider.next_round()
        # The first round opens a connection per call; the later rounds open none.
        assert provider.connections == CALLS
    finally:
        server.close()
