"""TransportWriter writes a frame straight to the socket when nothing is buffered before it, and leaves
everything else to the transport: frames must arrive whole and in order whichever way each one went.
These run over real connected sockets (socketpair) and, at the end, a real uvloop connection."""

from __future__ import annotations

import asyncio
import socket
import threading

import pytest

from server.domain.events import EventEnvelope
from server.rpc.uvicorn_ws import TransportWriter
from server.sync.writer import SubscriptionWriter


class SocketTransport:
    """The parts of a transport the outbox uses, over a real socket; ``write`` buffers like a transport
    whose socket is not writable (it keeps the bytes until ``flush``)."""

    def __init__(self, sock: socket.socket, ssl: bool = False) -> None:
        self.sock = sock
        self.ssl = ssl
        self.buffered = bytearray()
        self.writes: list[bytes] = []

    def get_extra_info(self, name: str) -> object:
        if name == "socket":
            return self.sock
        if name == "sslcontext":
            return object() if self.ssl else None
        return None

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))
        self.buffered += data

    def flush(self) -> None:
        self.sock.setblocking(True)
        self.sock.sendall(self.buffered)
        self.buffered.clear()

    def get_write_buffer_size(self) -> int:
        return len(self.buffered)

    def is_closing(self) -> bool:
        return False


class Protocol:
    close_sent = False

    def __init__(self, transport: SocketTransport) -> None:
        self.transport = transport


@pytest.fixture
def pair():
    a, b = socket.socketpair()
    a.setblocking(False)
    yield a, b
    a.close()
    b.close()


def read_exactly(sock: socket.socket, n: int) -> bytes:
    sock.settimeout(5)
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        assert chunk, "connection closed early"
        out += chunk
    return out


def outbox_over(
    sock: socket.socket, limit: int = 1 << 20, ssl: bool = False
) -> tuple[TransportWriter, SocketTransport, list[int]]:
    transport = SocketTransport(sock, ssl=ssl)
    overflows: list[int] = []
    return TransportWriter(Protocol(transport), limit, lambda: overflows.append(1)), transport, overflows


def test_with_nothing_buffered_a_frame_goes_straight_to_the_socket(pair) -> None:
    a, b = pair
    outbox, transport, _ = outbox_over(a)
    outbox.send('{"id":1,"result":{"type":"data","data":"hello"}}')
    got = read_exactly(b, 2 + 48)
    assert got[:2] == b"\x81\x30" and got[2:] == b'{"id":1,"result":{"type":"data","data":"hello"}}'
    assert transport.writes == []


def test_while_the_transport_holds_bytes_frames_queue_behind_them_in_order(pair) -> None:
    a, b = pair
    outbox, transport, _ = outbox_over(a)
    transport.write(b"\x81\x05first")  # e.g. the rest of an earlier partial write
    outbox.send("second")
    outbox.send("third")
    assert transport.writes == [b"\x81\x05first", b"\x81\x06second", b"\x81\x05third"]
    transport.flush()
    outbox.send("fourth")  # buffer empty again: direct
    assert read_exactly(b, 7 + 8 + 7 + 8) == b"\x81\x05first\x81\x06second\x81\x05third\x81\x06fourth"
    assert len(transport.writes) == 3


def test_the_rest_of_a_partial_write_goes_to_the_transport_and_the_bytes_arrive_whole(pair) -> None:
    a, b = pair
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    outbox, transport, overflows = outbox_over(a, limit=10 << 20)
    payload = "x" * 2_000_000  # far more than the socket buffers hold
    outbox.send(payload)
    assert len(transport.writes) == 1 and 0 < len(transport.writes[0]) < len(payload)
    header = b"\x81\x7f" + len(payload).to_bytes(8, "big")
    flusher = threading.Thread(target=transport.flush)  # the transport writes its part once writable
    flusher.start()
    received = read_exactly(b, len(header) + len(payload))
    flusher.join(5)
    assert received == header + payload.encode() and overflows == []


def test_a_partial_write_past_the_limit_closes_the_slow_consumer(pair) -> None:
    a, _b = pair
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    outbox, transport, overflows = outbox_over(a, limit=100_000)
    outbox.send("y" * 1_000_000)
    assert overflows == [1] and outbox.closed
    outbox.send("after")  # nothing more is written to a closed outbox
    assert len(transport.writes) == 1


def test_a_failed_connection_hands_the_frame_to_the_transport(pair) -> None:
    a, b = pair
    b.close()
    outbox, transport, _ = outbox_over(a)
    outbox.send("lost")  # EPIPE on the socket: the transport writes it, finds the error, reports the loss
    assert transport.writes == [b"\x81\x04lost"]


def test_tls_connections_are_written_only_by_their_transport(pair) -> None:
    a, b = pair
    outbox, transport, _ = outbox_over(a, ssl=True)
    outbox.send("secret")
    assert transport.writes == [b"\x81\x06secret"]
    b.setblocking(False)
    with pytest.raises(BlockingIOError):
        b.recv(10)


def test_fan_out_batch_mixes_direct_and_buffered_connections_correctly() -> None:
    pairs = [socket.socketpair() for _ in range(3)]
    try:
        outs = []
        for a, _b in pairs:
            a.setblocking(False)
            outs.append(outbox_over(a))
        outs[1][1].write(b"\x81\x03old")  # this one still holds bytes
        env = EventEnvelope.build("s", 7, "queue-cleared", {})
        TransportWriter.send_event_many([SubscriptionWriter(ob, b'{"id":1') for ob, _t, _o in outs], (env,))
        frame = env.ws_frame(b'{"id":1', lambda n: bytes((0x81, n)) if n < 126 else b"\x81\x7e" + n.to_bytes(2, "big"))
        assert read_exactly(pairs[0][1], len(frame)) == frame
        assert read_exactly(pairs[2][1], len(frame)) == frame
        assert outs[1][1].writes == [b"\x81\x03old", frame]
    finally:
        for a, b in pairs:
            a.close()
            b.close()


@pytest.mark.parametrize("loop_factory", ["asyncio", "uvloop"])
def test_over_a_real_event_loop_connection_every_frame_arrives_in_order(loop_factory: str) -> None:
    """Real transports (uvloop's, as under the server, and asyncio's): direct writes, the transport's
    buffer taking over when the peer does not read, and the order kept across the switch."""
    import uvloop

    factory = uvloop.new_event_loop if loop_factory == "uvloop" else asyncio.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(_frames_arrive_in_order())


async def _frames_arrive_in_order() -> None:
    loop = asyncio.get_running_loop()
    received = bytearray()
    got_all = loop.create_future()
    total = 0

    class Reader(asyncio.Protocol):
        def data_received(self, data: bytes) -> None:
            received.extend(data)
            if len(received) >= total and not got_all.done():
                got_all.set_result(None)

    class Holder(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.transport = transport

    holder = Holder()
    server = await loop.create_server(lambda: holder, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    reader_transport, _ = await loop.create_connection(Reader, "127.0.0.1", port)
    reader_transport.pause_reading()
    while not hasattr(holder, "transport"):
        await asyncio.sleep(0.01)
    holder.transport.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16384)
    outbox = TransportWriter(Protocol(holder.transport), 64 << 20, lambda: None)  # type: ignore[arg-type]
    assert outbox._fd >= 0
    frames = [f"{i:06d}" + "z" * 1000 for i in range(3000)]  # ~3 MB: more than the socket buffers hold
    total = sum(2 + 2 + len(f) for f in frames)
    for text in frames:
        outbox.send(text)
    assert holder.transport.get_write_buffer_size() > 0  # the transport took over at some point
    reader_transport.resume_reading()
    await asyncio.wait_for(got_all, 30)
    expected = b"".join(b"\x81\x7e" + len(f).to_bytes(2, "big") + f.encode() for f in frames)
    assert bytes(received) == expected
    reader_transport.close()
    holder.transport.close()
    server.close()
    await server.wait_closed()
