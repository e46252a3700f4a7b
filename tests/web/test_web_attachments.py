"""Attachments in the web app: files picked with the "Attach files" button, pasted (an image) and dropped on
the message box show as chips that can be removed; a file past the server's limit shows the server's reason
and holds the message back; a message sent while the model answers waits in the queue with its files on
both devices ("2 attachments"), goes out when the answer ends, and both devices show the image as a
thumbnail (fetched with the token, from a blob: URL revoked when the chat is left) and the text file as a
chip that saves it. The server, read by the test's own client, is the judge of what was sent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from web_support import MAX_FILE_BYTES, Driver, WebServer, answers, texts


def test_files_picked_pasted_dropped_queued_and_shown_on_both_devices(
    web_server: WebServer, browser: Driver, tmp_path: Path
) -> None:
    api = web_server.api("alice")
    sid = api.mutate("session.create", {"title": "files"})["id"]

    def attached(items: list[dict[str, Any]]) -> list[tuple[str, str]]:
        return [(a["name"], a["mediaType"]) for a in items]

    def check(label: str, data: dict[str, Any]) -> None:
        if label == "queued":
            queue = api.query("message.getQueuedMessages", {"sessionId": sid})
            assert [q["content"] for q in queue] == ["what do these say"] == data["texts"]
            assert attached(queue[0]["attachments"]) == [("notes.txt", "text/plain"), ("pasted.png", "image/png")]
            assert data["counts"] == ["2 attachments", "2 attachments"]
            assert data["busy"] == "true" and data["chipsAfterSend"] == []
        elif label == "sent":
            users = [m for m in api.messages(sid) if m["role"] == "user"]
            assert [m["content"] for m in users][1:] == ["what do these say"]
            files = users[1]["attachments"]
            assert attached(files) == [("notes.txt", "text/plain"), ("pasted.png", "image/png")]
            image = files[1]
            assert api.file(image["fileId"]).startswith(b"\x89PNG\r\n\x1a\n")
            for shown in data["shown"]:  # both devices
                assert len(shown) == 1
                [thumb] = shown[0]["images"]
                assert thumb == {
                    "alt": "pasted.png",
                    "blob": True,
                    "loaded": True,
                    "width": 96,
                    "height": 64,
                    "fileId": image["fileId"],
                }
                assert [" ".join(t.split()) for t in shown[0]["files"]] == [f"notes.txt {files[0]['size']} B"]

    seen = browser.run(
        "attachments",
        check,
        token=web_server.tokens["alice"],
        sessionId=sid,
        maxFileBytes=MAX_FILE_BYTES,
        shots=str(tmp_path),
    )
    assert seen["problems"] == [], seen["problems"]
    assert seen["picked"] == ["notes.txt", "pasted.png", "dropped.csv"]
    assert seen["kept"] == ["notes.txt", "pasted.png"]
    # The server's own words for the refused file, and the typed message kept while it held the send back.
    assert seen["refusal"] and "413" not in seen["refusal"]
    assert "could not be attached" in seen["blockedAnnouncement"]
    assert seen["boxWhileBlocked"] == "not while a file is refused"
    assert seen["saved"] == {"name": "notes.txt", "text": seen["notes"]}
    assert seen["axe"] == []
    assert seen["dropBeside"] == {"refused": True, "chips": 0}
    # The echo model names what it received: both files of the queued message, whole.
    users = [m for m in api.messages(sid) if m["role"] == "user"]
    received = " ".join(f"[received {a['name']}: {a['mediaType']}, {a['size']} bytes]" for a in users[1]["attachments"])
    assert seen["answers"][0] == seen["answers"][1] == texts(answers(api, sid))
    assert received in seen["answers"][0][1]
    # It is given nothing of data.bin (not text, an image or a PDF): both devices say so under that answer only.
    assert seen["notices"][0] == seen["notices"][1]
    assert seen["notices"][0][:2] == [[], []] and len(seen["notices"][0][2]) == 1
    assert seen["notices"][0][2][0].startswith("data.bin was not given to the model")
    assert seen["noticesAfterReload"] == seen["notices"][1]  # kept with the answer, not only on its event
    assert seen["blobUrl"] == {"before": "alive", "after": "revoked"}
    assert (tmp_path / "composer.png").stat().st_size > 0 and (tmp_path / "history.png").stat().st_size > 0


def test_a_file_taken_off_a_queued_message_on_one_device_goes_on_both(web_server: WebServer, browser: Driver) -> None:
    api = web_server.api("alice")
    sid = api.mutate("session.create", {"title": "queued files", "queuePaused": True})["id"]
    notes = api.upload("notes.txt", b"meeting notes\n" * 20)
    table = api.upload("table.csv", b"a,b\n1,2\n")
    api.mutate(
        "message.enqueueMessage",
        {"sessionId": sid, "content": "read both", "attachments": [{"fileId": notes["id"]}, {"fileId": table["id"]}]},
    )

    def check(label: str, data: dict[str, Any]) -> None:
        [queued] = api.query("message.getQueuedMessages", {"sessionId": sid})
        names = [a["name"] for a in queued["attachments"]]
        if label == "before":
            assert names == ["notes.txt", "table.csv"] and data["counts"] == ["2 attachments", "2 attachments"]
        elif label == "after":
            assert names == ["table.csv"] and queued["content"] == "read both"
            assert data["counts"] == ["1 attachment", "1 attachment"]

    seen = browser.run("queued_files_edit", check, token=web_server.tokens["alice"], sessionId=sid)
    assert seen["problems"] == [], seen["problems"]
    assert seen["editing"] == ["notes.txt", "table.csv"]
