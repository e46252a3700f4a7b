"""A local OpenAI-compatible server for benchmarks: ``POST /v1/chat/completions`` streamed as the real API does.

    .venv/bin/python bench/fake_openai.py --port 8900

Each answer is ``n`` tokens (``n`` = the first word of the last user message), paced at the request's
``model`` tokens per second (``full``: as fast as the socket takes them), each token's text the wall-clock
time in ns it was written, so ``bench/capacity.py --provider openai`` measures latency from the wire to the
subscriber with chatsync's OpenAI adapter (the official SDK, its HTTP client, SSE parsing) in between.
Chunks are ``chat.completion.chunk`` objects over server-sent events (HTTP/1.1, chunked, keep-alive), ending
with a ``finish_reason`` chunk, a usage chunk when ``stream_options.include_usage`` asks for one, and
``data: [DONE]``. Plain asyncio: its own CPU stays small and out of the server's process.
"""

from __future__ import annotations

import argparse
import asyncio
import time

import orjson


def _chunk(delta: dict, finish: str | None = None, usage: dict | None = None) -> bytes:
    body = {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "bench",
        "choices": [] if usage else [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    if usage:
        body["usage"] = usage
    data = b"data: " + orjson.dumps(body) + b"\n\n"
    return b"%x\r\n%s\r\n" % (len(data), data)


def _tokens(request: dict) -> int:
    content = next(m["content"] for m in reversed(request["messages"]) if m["role"] == "user")
    if isinstance(content, list):
        content = " ".join(part.get("text", "") for part in content)
    return int(content.split()[0])


async def _answer(writer: asyncio.StreamWriter, request: dict) -> None:
    n, model = _tokens(request), str(request.get("model", "30"))
    interval = 0.0 if model == "full" else 1.0 / float(model)
    writer.write(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n"
        b"connection: keep-alive\r\n\r\n" + _chunk({"role": "assistant", "content": ""})
    )
    start = time.perf_counter()
    for i in range(n):
        if interval:
            await asyncio.sleep(max(start + i * interval - time.perf_counter(), 0))
        writer.write(_chunk({"content": f"{time.time_ns()} "}))
        await writer.drain()
    writer.write(_chunk({}, "stop"))
    if (request.get("stream_options") or {}).get("include_usage"):
        writer.write(_chunk({}, usage={"prompt_tokens": 1, "completion_tokens": n, "total_tokens": n + 1}))
    data = b"data: [DONE]\n\n"
    writer.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(data), data))
    await writer.drain()


async def _connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            body = await reader.readexactly(length)
            if b"/chat/completions" not in head.split(b"\r\n", 1)[0]:
                writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
                continue
            await _answer(writer, orjson.loads(body))
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def serve(port: int) -> None:
    server = await asyncio.start_server(_connection, "127.0.0.1", port, backlog=4096)
    async with server:
        await server.serve_forever()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    args = ap.parse_args()
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(serve(args.port))


if __name__ == "__main__":
    main()
