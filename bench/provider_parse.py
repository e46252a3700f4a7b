"""What a provider adapter costs in this process: its request (the SDK's request building) and each chunk of its
stream (reading, parsing, events), apart from any network.

    .venv/bin/python bench/provider_parse.py [--providers openai anthropic] [--chunks 3000] [--history 10 100]
        [--runs 3]

Each adapter is built as the server builds it (its SDK, with the HTTP client the adapter makes) and pointed at a
local server in another process, which answers every request with an event stream of ``--chunks`` text deltas in
the shape each API documents, one HTTP chunk per event, as the real services stream. ``--mock`` answers through an
``httpx2.MockTransport`` in process instead (no socket: the adapter's and the SDK's parsing alone). The CPU is
this process's only. Per provider it prints the CPU per streamed chunk (one long answer) and per request at each
``--history`` length (messages in the conversation; a one-chunk answer), median and spread over ``--runs``.
The events are ``--gap-ms`` apart, so each is read on its own, as from a model streaming at its pace.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import statistics
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import httpx2

from server.llm import ChatRequest, Message, RequestOptions
from server.llm.providers.anthropic import AnthropicProvider
from server.llm.providers.openai import OpenAIProvider


def openai_stream(chunks: int) -> bytes:
    out = []
    for i in range(chunks):
        delta = {"content": f"word{i} "} if i else {"role": "assistant", "content": "word0 "}
        chunk = {
            "id": "c",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
        }
        out.append(b"data: " + json.dumps(chunk).encode() + b"\n\n")
    end = {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
    }
    usage = {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [],
        "usage": {"prompt_tokens": 10, "completion_tokens": chunks, "total_tokens": 10 + chunks},
    }
    out += [b"data: " + json.dumps(end).encode() + b"\n\n", b"data: " + json.dumps(usage).encode() + b"\n\n"]
    return b"".join(out) + b"data: [DONE]\n\n"


def anthropic_stream(chunks: int) -> bytes:
    def event(name: str, data: dict[str, Any]) -> bytes:
        return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()

    out = [
        event(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg",
                    "type": "message",
                    "role": "assistant",
                    "model": "m",
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 10, "output_tokens": 1},
                },
            },
        ),
        event(
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        ),
    ]
    for i in range(chunks):
        out.append(
            event(
                "content_block_delta",
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": f"word{i} "}},
            )
        )
    out += [
        event("content_block_stop", {"type": "content_block_stop", "index": 0}),
        event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": chunks},
            },
        ),
        event("message_stop", {"type": "message_stop"}),
    ]
    return b"".join(out)


def request(history: int) -> ChatRequest:
    messages = [Message(role="system", content="Be brief.")]
    for i in range(history - 1):
        messages.append(Message(role="user" if i % 2 == 0 else "assistant", content="word " * 60))
    if messages[-1].role != "user":
        messages.append(Message(role="user", content="and then?"))
    return ChatRequest(messages=tuple(messages), options=RequestOptions(model="m", max_tokens=1000))


def serve(port: int, bodies: dict[str, bytes], gap: float, ready: Any) -> None:
    """The local server: ``POST /<key>/...`` answers ``bodies[key]``, one HTTP chunk per event, ``gap`` seconds
    apart (so that the client reads each on its own, as from a model streaming at its pace)."""
    from aiohttp import web

    async def handle(request: web.Request) -> web.StreamResponse:
        await request.read()
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        try:
            for event in bodies[request.match_info["key"]].split(b"\n\n"):
                if event:
                    await response.write(event + b"\n\n")
                    await asyncio.sleep(gap)
            await response.write_eof()
        except ConnectionError:
            pass  # the client read all it wanted (a stream's end event) and closed
        return response

    async def main() -> None:
        app = web.Application()
        app.router.add_post("/{key}/{tail:.*}", handle)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        ready.set()
        await asyncio.Event().wait()

    asyncio.run(main())


def provider(name: str, body: bytes, base: str | None) -> Any:
    """The adapter; ``base``: the local server's URL for this body, else a MockTransport answers in process."""
    if base is None:

        def reply(req: httpx2.Request) -> httpx2.Response:
            return httpx2.Response(200, content=body, headers={"content-type": "text/event-stream"})

        client: httpx2.AsyncClient | None = httpx2.AsyncClient(transport=httpx2.MockTransport(reply))
    else:
        client = None  # the client the adapter makes, as the server's
    if name == "openai":
        return OpenAIProvider(api_key="sk-bench", base_url=base and base + "/v1", http_client=client)
    return AnthropicProvider(api_key="sk-bench", base_url=base, http_client=client)


async def cpu_of(p: Any, req: ChatRequest, times: int) -> float:
    """CPU seconds per full stream of ``req`` through ``p`` (the first one, a warm-up, not counted)."""
    async for _ in p.stream(req):
        pass
    started = time.process_time()
    for _ in range(times):
        async for _ in p.stream(req):
            pass
    return (time.process_time() - started) / times


async def measure(name: str, chunks: int, histories: list[int], url: str | None) -> dict[str, float]:
    make = openai_stream if name == "openai" else anthropic_stream
    out: dict[str, float] = {}
    p = provider(name, make(chunks), url and f"{url}/{name}-long")
    out["chunk"] = await cpu_of(p, request(2), 3) / chunks
    await p.aclose()
    small = provider(name, make(1), url and f"{url}/{name}-one")
    for n in histories:
        out[f"request@{n}"] = await cpu_of(small, request(n), 50)
    await small.aclose()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--providers", nargs="+", choices=("openai", "anthropic"), default=["openai", "anthropic"])
    ap.add_argument("--chunks", type=int, default=3000)
    ap.add_argument("--history", type=int, nargs="+", default=[10, 100])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--mock", action="store_true", help="answer in process (httpx2.MockTransport), no socket")
    ap.add_argument("--gap-ms", type=float, default=1.0, help="between two events of the local server's stream")
    args = ap.parse_args()
    url, server = None, None
    if not args.mock:
        from bench.common import free_port

        bodies = {
            f"{name}-{kind}": (openai_stream if name == "openai" else anthropic_stream)(n)
            for name in ("openai", "anthropic")
            for kind, n in (("long", args.chunks), ("one", 1))
        }
        port, ready = free_port(), mp.get_context("spawn").Event()
        server = mp.get_context("spawn").Process(
            target=serve, args=(port, bodies, args.gap_ms / 1000, ready), daemon=True
        )
        server.start()
        if not ready.wait(30):
            raise RuntimeError("the local server did not start")
        url = f"http://127.0.0.1:{port}"
    try:
        import uvloop  # the server's loop

        uvloop.install()
    except ImportError:
        pass
    for name in args.providers:
        runs = [asyncio.run(measure(name, args.chunks, args.history, url)) for _ in range(args.runs)]
        for key in runs[0]:
            values = [r[key] * 1e6 for r in runs]
            med, half = statistics.median(values), (max(values) - min(values)) / 2
            unit = (
                "µs per chunk (stream read, parsed, events)"
                if key == "chunk"
                else (f"µs per request with {key.split('@')[1]} messages (request built and sent, a one-chunk answer)")
            )
            print(f"{name:9s} {med:9.1f} ± {half:.1f} {unit}")
    if server is not None:
        server.terminate()


if __name__ == "__main__":
    main()
