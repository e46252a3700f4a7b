"""POST /files and GET /files/{id}: round trips, media types from the bytes, owners only, one copy per user."""

from __future__ import annotations

import hashlib
import os
from typing import Any

import httpx
from file_helpers import download, stored_nothing, upload, user_id
from sqlalchemy import func, select

from server.files import clean_name
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
    family = "\U0001f468\u200d\U0001f469\u200d\U0001f467 family.png"  # one emoji, joined by zero-width joiners
    reply = await upload(files_server, b"x", family)
    assert reply.json()["name"] == family
    got = await download(files_server, reply.json()["id"])
    assert (
        "filename*=UTF-8''%F0%9F%91%A8%E2%80%8D%F0%9F%91%A9%E2%80%8D%F0%9F%91%A7%20family.png"
        in got.headers["content-disposition"]
    )
    spoof = await upload(files_server, b"x", "invoice\u202egnp.exe")  # shown as "invoiceexe.png" if kept
    assert spoof.json()["name"] == "invoicegnp.exe"


def test_name_cleaning() -> None:
    kept = [
        "\U0001f3f3\ufe0f\u200d\U0001f308 flag.png",
        "\U0001f469\U0001f3fd\u200d\U0001f4bb dev.txt",
        "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645.txt",  # Persian: the non-joiner shapes the word
    ]
    for name in kept:
        assert clean_name(name) == name, name
    cleaned = {
        "\u2067evil\u2069\u202d.txt\u202c": "evil.txt",  # isolates and overrides
        "a\u200bb\u200e\u200fc\ufeff.txt": "abc.txt",  # zero-width space, direction marks, BOM
        "\u200d\U0001f468 \u200d.txt": "\U0001f468 .txt",  # joiners that join nothing
        "x\u200d.png": "x.png",
        "tab\there\nnew\x00line\x7f.txt": "tabherenewline.txt",
        "\u65e5\u672c\u3000\u8a9e\u00a0.txt": "\u65e5\u672c \u8a9e .txt",  # every space becomes a plain one
        "C:\\Users\\me\\..\\a.txt": "a.txt",
        "\u202e\u200b": "file",
        "x" * 300: "x" * 255,
    }
    for raw, expected in cleaned.items():
        assert clean_name(raw) == expected, raw


async def test_downloads_are_not_kept_by_caches(files_server: Any) -> None:
    for data in (b"notes", PNG):
        got = await download(files_server, (await upload(files_server, data, "f")).json()["id"])
        assert got.headers["cache-control"] == "no-store"


async def test_part_headers_up_to_the_documented_bound(files_server: Any) -> None:
    """A part's headers may take 16 KiB (names and values), in up to 32 lines; one line may use all of it."""
    auth = {"authorization": f"Bearer {files_server.tokens['alice']}"}

    async def send(headers: bytes) -> httpx.Response:
        body = b'--b\r\ncontent-disposition: form-data; name="file"; filename="h.txt"\r\n' + headers
        async with httpx.AsyncClient(base_url=files_server.url) as http:
            return await http.post(
                "/files",
                content=body + b"\r\nhello\r\n--b--\r\n",
                headers={**auth, "content-type": "multipart/form-data; boundary=b"},
            )

    one_long = b"x-note: " + b"y" * 15_000 + b"\r\n"
    assert (await send(one_long)).status_code == 200
    many = b"".join(b"x-%d: v\r\n" % i for i in range(31))
    assert (await send(many)).status_code == 200
    for past in (b"x-note: " + b"y" * 16_400 + b"\r\n", many + b"x-last: v\r\n"):
        reply = await send(past)
        assert reply.status_code == 400 and reply.json()["error"]["code"] == "BAD_REQUEST", reply.text
    assert (await files_server.services.files.usage(await user_id(files_server, "alice"))).files == 2


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
        for body, boundary in [(body, "b") for body in bodies] + [(b"--" + b"q" * 300 + b"\r\n", "q" * 300)]:
            reply = await http.post(
                "/files",
                content=body,
                headers={
                    "authorization": f"Bearer {files_server.tokens['alice']}",
                    "content-type": f"multipart/form-data; boundary={boundary}",
                },
            )
            assert reply.status_code == 400 and reply.json()["error"]["code"] == "BAD_REQUEST", (body, reply.text)
    assert await stored_nothing(files_server)
