"""POST /files and GET /files/{id}: round trips, media types from the bytes, owners only, one copy per user."""

from __future__ import annotations

import hashlib
import os
from typing import Any

import httpx
from file_helpers import download, stored_nothing, upload, user_id
from sqlalchemy import func, select

from server.store.models import FileBlob

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + os.urandom(64)


async def test_round_trip_with_digest(files_server: Any) -> None:
    data = os.urandom(700_000)  # several storage chunks
    reply = await upload(files_server, data, "photo.bin")
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["name"] == "photo.bin" and body["size"] == len(data)
    assert body["sha256"] == hashlib.sha256(data).hexdigest()
    assert body["mediaType"] == "application/octet-stream"
    got = await download(files_server, body["id"])
    assert got.status_code == 200
    assert hashlib.sha256(got.content).hexdigest() == body["sha256"]
    assert got.headers["content-type"] == "application/octet-stream"
    assert got.headers["content-disposition"].startswith("attachment;")
    assert got.headers["x-content-type-options"] == "nosniff"
    owner = await user_id(files_server, "alice")
    info = await files_server.services.files.info(owner, body["id"])
    assert (info.name, info.size, info.sha256) == ("photo.bin", len(data), body["sha256"])
    assert await files_server.services.files.read(owner, body["id"]) == data


async def test_media_type_comes_from_the_bytes(files_server: Any) -> None:
    html = b"<!doctype html><script>alert(document.cookie)</script>"
    reply = await upload(files_server, html, "cat.png", content_type="image/png")
    assert reply.json()["mediaType"] == "text/plain"  # what it is, for the model: text
    got = await download(files_server, reply.json()["id"])
    assert got.headers["content-type"] == "application/octet-stream"  # what it is served as: bytes to save
    assert got.headers["content-disposition"].startswith("attachment;")
    assert got.content == html

    image = await upload(files_server, PNG, "../../etc/shot.png", content_type="text/plain")
    assert image.json()["mediaType"] == "image/png" and image.json()["name"] == "shot.png"
    got = await download(files_server, image.json()["id"])
    assert got.headers["content-type"] == "image/png"
    assert got.headers["content-disposition"].startswith("inline;")

    kinds = {
        b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n": "application/pdf",
        b"GIF89a\x01\x00": "image/gif",
        b"\xff\xd8\xff\xe0\x00\x10JFIF": "image/jpeg",
        b"RIFF\x10\x00\x00\x00WEBPVP8 ": "image/webp",
        "naïve café\n".encode(): "text/plain",
        b"\x00\x01\x02 binary": "application/octet-stream",
        b"\xc3\x28 invalid utf-8": "application/octet-stream",
    }
    for data, expected in kinds.items():
        assert (await upload(files_server, data, "f")).json()["mediaType"] == expected, data


async def test_other_users_and_strangers_get_nothing(files_server: Any) -> None:
    f = (await upload(files_server, b"private", "diary.txt", user="alice")).json()
    theirs = await download(files_server, f["id"], user="bob")
    assert theirs.status_code == 404 and theirs.json()["error"]["code"] == "NOT_FOUND"
    unknown = await download(files_server, "0" * 32)
    assert unknown.status_code == 404
    async with httpx.AsyncClient(base_url=files_server.url) as http:
        anonymous = await http.get(f"/files/{f['id']}")
        assert anonymous.status_code == 401 and anonymous.json()["error"]["code"] == "UNAUTHORIZED"
        anonymous = await http.post("/files", files={"file": ("a", b"x")})
        assert anonymous.status_code == 401
        wrong = await http.post(
            "/files", content=b"not multipart", headers={"authorization": f"Bearer {files_server.tokens['alice']}"}
        )
        assert wrong.status_code == 400 and wrong.json()["error"]["code"] == "BAD_REQUEST"
        no_file = await http.post(
            "/files", files={"other": ("a", b"x")}, headers={"authorization": f"Bearer {files_server.tokens['alice']}"}
        )
        assert no_file.status_code == 400


async def test_identical_content_is_stored_once_per_user(files_server: Any) -> None:
    data = os.urandom(300_000)
    a = (await upload(files_server, data, "a.bin")).json()
    b = (await upload(files_server, data, "b.bin")).json()
    c = (await upload(files_server, data, "c.bin", user="bob")).json()
    assert a["id"] != b["id"] and a["sha256"] == b["sha256"] == c["sha256"]
    assert (await download(files_server, b["id"])).content == data
    async with files_server.services.db.read() as s:
        per_user = dict((await s.execute(select(FileBlob.user_id, func.count()).group_by(FileBlob.user_id))).all())
    assert sorted(per_user.values()) == [1, 1]  # alice's two files share a blob; bob has his own


async def test_names_keep_their_characters(files_server: Any) -> None:
    reply = await upload(files_server, b"x", "résumé 2026 \"final\".txt")
    assert reply.json()["name"] == "résumé 2026 \"final\".txt"
    got = await download(files_server, reply.json()["id"])
    disposition = got.headers["content-disposition"]
    assert "filename*=UTF-8''r%C3%A9sum%C3%A9%202026%20%22final%22.txt" in disposition
    assert 'filename="r_sum_ 2026 _final_.txt"' in disposition


async def test_malformed_bodies_are_bad_requests(files_server: Any) -> None:
    bodies = [
        b"garbage",
        b"--b\r\nno blank line after headers",
        b"--b\r\ncontent-disposition: form-data; name=\"file\"; filename=\"a\"\r\n\r\nunterminated",
        b"--b\r\n\r\n\r\n--b--\r\n",
        b"",
        b"--b--\r\n",
        b"--b\r\n" + b"x-long: " + b"y" * 20_000 + b"\r\n\r\nz\r\n--b--\r\n",
    ]
    async with httpx.AsyncClient(base_url=files_server.url) as http:
        for body in bodies:
            reply = await http.post(
                "/files",
                content=body,
                headers={
                    "authorization": f"Bearer {files_server.tokens['alice']}",
                    "content-type": "multipart/form-data; boundary=b",
                },
            )
            assert reply.status_code == 400 and reply.json()["error"]["code"] == "BAD_REQUEST", (body, reply.text)
    assert await stored_nothing(files_server)
