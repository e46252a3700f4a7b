"""Calls the files tests share: upload and download over HTTP, and what storage holds."""

from __future__ import annotations

from typing import Any

import httpx


async def upload(
    live: Any, data: bytes, name: str = "notes.txt", user: str = "alice", content_type: str = "application/octet-stream"
) -> httpx.Response:
    async with httpx.AsyncClient(base_url=live.url, timeout=60) as http:
        return await http.post(
            "/files",
            files={"file": (name, data, content_type)},
            headers={"authorization": f"Bearer {live.tokens[user]}"},
        )


async def download(live: Any, file_id: str, user: str = "alice") -> httpx.Response:
    async with httpx.AsyncClient(base_url=live.url, timeout=60) as http:
        return await http.get(f"/files/{file_id}", headers={"authorization": f"Bearer {live.tokens[user]}"})


async def stored_nothing(live: Any) -> bool:
    """No file, no blob, and no bytes in storage."""
    from sqlalchemy import func, select

    from server.store.models import FileBlob, StoredFile

    services = live.services
    async with services.db.read() as s:
        files = (await s.execute(select(func.count()).select_from(StoredFile))).scalar_one()
        blobs = (await s.execute(select(func.count()).select_from(FileBlob))).scalar_one()
    return files == 0 and blobs == 0 and await services.files.storage.is_empty()


async def user_id(live: Any, name: str) -> str:
    principal = await live.services.auth.identify(live.tokens[name])
    return principal.user.id
