"""Per-user file bounds hold under concurrency: bytes stored, files kept and uploads under way. Many uploads sent
at once never pass a bound together, the ones past it get the documented error and leave nothing, and an upload
that fails, is cut off or dies with its server gives back what it reserved."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import httpx
from file_helpers import HeldUpload, refused_at_once, until, upload, user_id
from servers import ServerProcess
from sqlalchemy import func, select

from server.files import create_storage
from server.services.auth import AuthService
from server.settings import load_settings
from server.store import migrate
from server.store.db import Database
from server.store.models import FileBlob

ROOMY = {"max_uploads_in_flight_per_user": 100}  # so the bound under test is the one that refuses


async def _stored_ids(live: Any) -> list[str]:
    return [i async for i in live.services.files.storage.stored_ids()]


async def test_concurrent_uploads_stay_within_the_byte_quota(db_url: str, server_factory: Any) -> None:
    size, quota = 60_000, 1_000_000
    live = await server_factory(db_url, max_file_bytes=100_000, max_user_file_bytes=quota, **ROOMY)
    replies = await asyncio.gather(*(upload(live, os.urandom(size), f"{i}.bin") for i in range(50)))
    stored = [r for r in replies if r.status_code == 200]
    for refused in (r for r in replies if r.status_code != 200):
        assert refused.status_code == 413, refused.text
        assert refused.json()["error"]["code"] == "PAYLOAD_TOO_LARGE"
        assert "CHATSYNC_MAX_USER_FILE_BYTES" in refused.json()["error"]["message"]
    alice = await user_id(live, "alice")
    usage = await live.services.files.usage(alice)
    assert usage.stored == len(stored) * size <= quota and usage.files == len(stored)
    assert (usage.in_flight, usage.held) == (0, 0)
    assert len(await _stored_ids(live)) == len(stored)  # no bytes of a refused upload are left anywhere
    # At rest, the quota is used up to the last file that fits, and not one byte past it.
    while (more := await upload(live, os.urandom(size), "more.bin")).status_code == 200:
        pass
    assert more.status_code == 413
    usage = await live.services.files.usage(alice)
    assert quota - size < usage.stored <= quota


async def test_concurrent_uploads_stay_within_the_file_cap(db_url: str, server_factory: Any) -> None:
    live = await server_factory(db_url, max_files_per_user=10, **ROOMY)
    replies = await asyncio.gather(*(upload(live, os.urandom(100), f"{i}.bin") for i in range(50)))
    assert sorted(r.status_code for r in replies) == [200] * 10 + [413] * 40
    for refused in (r for r in replies if r.status_code == 413):
        assert "CHATSYNC_MAX_FILES_PER_USER" in refused.json()["error"]["message"]
    usage = await live.services.files.usage(await user_id(live, "alice"))
    assert (usage.files, usage.in_flight) == (10, 0)
    assert len(await _stored_ids(live)) == 10


async def test_uploads_under_way_are_capped(db_url: str, server_factory: Any) -> None:
    live = await server_factory(db_url, max_uploads_in_flight_per_user=4)
    token = live.tokens["alice"]
    held = await asyncio.gather(*(HeldUpload(live.url, token, os.urandom(200_000), f"{i}").start() for i in range(50)))
    under_way = await refused_at_once(held, admitted=4)
    alice = await user_id(live, "alice")
    assert (await live.services.files.usage(alice)).in_flight == 4
    assert (await upload(live, b"mine", user="bob")).status_code == 200  # the cap is per user
    assert [(await h.finish())[0] for h in under_way] == [200] * 4
    usage = await live.services.files.usage(alice)
    assert (usage.files, usage.in_flight, usage.held) == (4, 0, 0)
    assert (await upload(live, b"next")).status_code == 200  # the slots are free again


async def test_a_failed_or_cut_off_upload_gives_back_its_reservation(db_url: str, server_factory: Any) -> None:
    live = await server_factory(
        db_url, max_file_bytes=300_000, max_user_file_bytes=300_000, max_uploads_in_flight_per_user=1
    )
    alice = await user_id(live, "alice")
    files = live.services.files

    cut = await HeldUpload(live.url, live.tokens["alice"], os.urandom(250_000)).start()
    await until(lambda: _holding(files, alice, in_flight=1))
    assert (await upload(live, b"x")).status_code == 429  # the one slot is taken
    cut.abort()
    await until(lambda: _holding(files, alice, in_flight=0))

    too_big = await upload(live, os.urandom(300_001))  # refused while its body streams in
    assert too_big.status_code == 413
    assert await _holding(files, alice, in_flight=0)
    async with httpx.AsyncClient(base_url=live.url) as http:
        broken = await http.post(
            "/files",
            content=b"--b\r\ncontent-disposition: form-data; name=\"file\"\r\n\r\nno end",
            headers={
                "authorization": f"Bearer {live.tokens['alice']}",
                "content-type": "multipart/form-data; boundary=b",
            },
        )
    assert broken.status_code == 400
    assert await _holding(files, alice, in_flight=0)

    whole = await upload(live, os.urandom(300_000))  # the whole quota is there to take
    assert whole.status_code == 200, whole.text
    assert len(await _stored_ids(live)) == 1


async def test_a_stalled_upload_loses_its_reservation(db_url: str, server_factory: Any) -> None:
    """Past the lease, an upload that sent nothing holds nothing: the room goes to others. If it sends again it
    goes on when it still fits, and is given up (408) when the collector took its bytes meanwhile."""
    live = await server_factory(db_url, max_user_file_bytes=400_000, upload_lease_seconds=3)
    alice, files = await user_id(live, "alice"), live.services.files
    resumed = await HeldUpload(live.url, live.tokens["alice"], os.urandom(150_000), "resumed").start()
    given_up = await HeldUpload(live.url, live.tokens["alice"], os.urandom(150_000), "given-up").start()
    await until(lambda: _holding(files, alice, in_flight=2))
    await until(lambda: _holding(files, alice, in_flight=0))  # both leases lapsed: nothing is held
    assert (await upload(live, os.urandom(200_000), "meanwhile")).status_code == 200  # 2 x 150 KB would not fit
    status, _headers, _body = await resumed.finish()
    assert status == 200
    await files.collect()  # takes the lapsed upload's row (and any bytes it wrote)
    status, _headers, body = await given_up.finish()
    assert status == 408 and body["error"]["code"] == "TIMEOUT", body
    assert "CHATSYNC_UPLOAD_LEASE_SECONDS" in body["error"]["message"]
    usage = await files.usage(alice)
    assert (usage.files, usage.stored, usage.in_flight) == (2, 350_000, 0)
    assert len(await _stored_ids(live)) == 2


async def _holding(files: Any, user: str, *, in_flight: int) -> bool:
    usage = await files.usage(user)
    return usage.in_flight == in_flight and (in_flight > 0 or usage.held == 0)


async def test_what_a_dead_server_reserved_is_freed(db_url: str, tmp_path: Path) -> None:
    """A server killed mid-upload cannot give its reservation back; it lapses, and the collector removes the
    half-written bytes."""
    async with Database(db_url) as db:
        await migrate.upgrade(db)
        _user, token = await AuthService(db).create_user("alice")
    blobs = str(tmp_path / "blobs")

    def server(name: str) -> ServerProcess:
        return ServerProcess(
            tmp_path,
            database_url=db_url,
            name=name,
            FILES_URL=blobs,
            MAX_UPLOADS_IN_FLIGHT_PER_USER="1",
            UPLOAD_LEASE_SECONDS="3",
            FILE_SWEEP_SECONDS="0.5",
        )

    first = server("first").start()
    try:
        await first.ready()
        held = await HeldUpload(first.url, token, os.urandom(2_000_000)).start()
        async with Database(db_url) as db:
            await until(lambda: _writing_blobs(db, 1))
            first.kill()
            held.abort()
            second = server("second").start()
            try:
                await second.ready()

                async def accepted() -> bool:
                    async with httpx.AsyncClient(base_url=second.url) as http:
                        reply = await http.post(
                            "/files",
                            files={"file": ("after.txt", b"after")},
                            headers={"authorization": f"Bearer {token}"},
                        )
                    assert reply.status_code in (200, 429), reply.text
                    return reply.status_code == 200

                await until(accepted)  # the dead server's slot came free
                await until(lambda: _writing_blobs(db, 0))
                storage = create_storage(load_settings(database_url=db_url, files_url=blobs), db)
                assert len([i async for i in storage.stored_ids()]) == 1  # the half-written bytes are gone
            finally:
                await second.terminate()
    finally:
        first.kill()


async def _writing_blobs(db: Database, n: int) -> bool:
    async with db.read() as s:
        count = (
            await s.execute(select(func.count()).select_from(FileBlob).where(FileBlob.state == "writing"))
        ).scalar()
    return count == n
