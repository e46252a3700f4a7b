"""A minimal WebSocket client for load generation: one asyncio Protocol per connection, frames parsed in
``data_received`` with no task per message, so one process can drive thousands of subscribers without
becoming the bottleneck it measures. Text frames only; the server's frames are unmasked."""

from __future__ import annotations

import asyncio
import base64
import os
import socket
from collections.abc import Callable

import orjson


class WsProtocol(asyncio.Protocol):
    def __init__(self, host: str, path: str, on_text: Callable[[bytes], None]) -> None:
        self.host, self.path, self.on_text = host, path, on_text
        self.buf = b""
        self.upgraded = False
        self.handshake_done = asyncio.get_running_loop().create_future()
        self.closed = asyncio.get_running_loop().create_future()
        self.close_code: int | None = None
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        key = base64.b64encode(os.urandom(16)).decode()
        transport.write(
            (
                f"GET {self.path} HTTP/1.1\r\nHost: {self.host}\r\nUpgrade: websocket\r\n"  # type: ignore[attr-defined]
                f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
            ).encode()
        )

    def send_text(self, text: str) -> None:
        self._send(0x1, text.encode())

    def _send(self, opcode: int, payload: bytes) -> None:
        mask = os.urandom(4)
        n = len(payload)
        first = 0x80 | opcode
        if n < 126:
            head = bytes((first, 0x80 | n))
        elif n < 65536:
            head = bytes((first, 0xFE)) + n.to_bytes(2, "big")
        else:
            head = bytes((first, 0xFF)) + n.to_bytes(8, "big")
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        assert self.transport is not None
        self.transport.write(head + mask + masked)

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if not self.upgraded:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            status = self.buf[: self.buf.find(b"\r\n")]
            self.buf = self.buf[end + 4 :]
            if b" 101 " not in status:
                if not self.handshake_done.done():
                    self.handshake_done.set_exception(ConnectionError(status.decode()))
                return
            self.upgraded = True
            if not self.handshake_done.done():  # (not when the opener gave up waiting)
                self.handshake_done.set_result(None)
        buf = self.buf
        pos = 0
        while len(buf) - pos >= 2:
            b0, b1 = buf[pos], buf[pos + 1]
            n = b1 & 0x7F
            hdr = 2
            if n == 126:
                if len(buf) - pos < 4:
                    break
                n = int.from_bytes(buf[pos + 2 : pos + 4], "big")
                hdr = 4
            elif n == 127:
                if len(buf) - pos < 10:
                    break
                n = int.from_bytes(buf[pos + 2 : pos + 10], "big")
                hdr = 10
            if len(buf) - pos < hdr + n:
                break
            payload = buf[pos + hdr : pos + hdr + n]
            pos += hdr + n
            opcode = b0 & 0x0F
            if opcode == 0x1:
                self.on_text(payload)
            elif opcode == 0x9:  # protocol-level ping from the server's keepalive
                self._send(0xA, payload)
            elif opcode == 0x8:
                self.close_code = int.from_bytes(payload[:2], "big") if len(payload) >= 2 else 1005
                if not self.closed.done():
                    self.closed.set_result(self.close_code)
        self.buf = buf[pos:]

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.handshake_done.done():  # closed before the upgrade's answer: the opener must not wait forever
            self.handshake_done.set_exception(ConnectionError("closed during the handshake"))
        if not self.closed.done():
            self.closed.set_result(self.close_code)


async def open_ws(url: str, on_text: Callable[[bytes], None], rcvbuf: int | None = None) -> WsProtocol:
    """``url`` like ``ws://127.0.0.1:8787/trpc?connectionParams=1``. ``rcvbuf`` fixes the socket's receive
    buffer (a small one makes a client that stops reading look like a slow device on a slow network)."""
    rest = url.split("://", 1)[1]
    hostport, _, path = rest.partition("/")
    host, _, port = hostport.partition(":")
    loop = asyncio.get_running_loop()
    sock = socket.socket()
    if rcvbuf is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.setblocking(False)
    await loop.sock_connect(sock, (host, int(port or 80)))
    _t, proto = await loop.create_connection(lambda: WsProtocol(hostport, "/" + path, on_text), sock=sock)
    await proto.handshake_done
    return proto


async def subscribe_session(
    url: str, token: str, session_id: str, on_text: Callable[[bytes], None], rcvbuf: int | None = None
) -> WsProtocol:
    """Open a tRPC WebSocket to the server at ``url`` (``http://host:port``), sign in with ``token`` and subscribe
    to the session's events as subscription 1. The caller's ``on_text`` sees every frame, ``started`` included."""
    ws = await open_ws(url.replace("http", "ws", 1) + "/trpc?connectionParams=1", on_text, rcvbuf)
    ws.send_text(orjson.dumps({"method": "connectionParams", "data": {"token": token}}).decode())
    subscribe = {
        "id": 1,
        "method": "subscription",
        "params": {"path": "session.events", "input": {"sessionId": session_id}},
    }
    ws.send_text(orjson.dumps(subscribe).decode())
    return ws
