"""The web app end to end: real server, real Chromium, real @trpc/client in the page. Two browser contexts
are two devices of one user; the tests' own tRPC calls over HTTP are a third client, and the judge of what
the server holds. Scenarios live in client_js/browser/app_scenarios.mjs; each test here says what must be
true of what the browsers showed."""

from __future__ import annotations

from typing import Any

from web_support import Driver, WebServer, answers, texts


def preview(text: str) -> str:
    return text if len(text) <= 50 else text[:50] + "…"


def no_problems(result: dict[str, Any]) -> None:
    assert result["problems"] == [], result["problems"]


def test_sign_in_then_a_first_chat(web_server: WebServer, browser: Driver) -> None:
    api = web_server.api("alice")
    seen = browser.run("sign_in", token=web_server.tokens["alice"])
    no_problems(seen)
    assert "not accepted" in seen["refused"]
    assert seen["axeSignedOut"] == []
    assert seen["storedToken"]
    # Start and end are announced; tokens are not (the log is aria-busy meanwhile).
    assert seen["announced"][0] == "Answering…" and seen["announced"][-1] == "Answer finished"
    assert len(seen["announced"]) <= 3
    server = answers(api, seen["sessionId"])
    assert len(server) == 1
    assert seen["shown"] == texts(server) == seen["afterReload"]
    title = api.query("session.get", {"sessionId": seen["sessionId"]})["session"]["title"]
    assert seen["sidebarTitle"] == title and title.startswith("hello0 hello1")


def test_queue_follows_every_device(web_server: WebServer, browser: Driver) -> None:
    api = web_server.api("alice")
    session = api.mutate("session.create", {"title": "queue"})
    sid = session["id"]

    def server_queue() -> list[str]:
        return [q["content"] for q in api.query("message.getQueuedMessages", {"sessionId": sid})]

    def check(label: str, data: dict[str, Any]) -> None:
        queue = server_queue()
        if "lists" in data:
            assert data["lists"][0] == data["lists"][1] == [preview(c) for c in queue], label
        if label == "enqueued":
            assert len(queue) == 3 and data["heading"] == "3 messages queued"
            assert all(c.startswith(f"queued message number {i}") for i, c in enumerate(queue, 1))
        elif label == "paused":
            assert api.query("session.get", {"sessionId": sid})["session"]["queuePaused"] is True
        elif label == "edited":
            assert queue[1].startswith("edited on device two: e0 e1")
        elif label == "moved":
            assert [c[:23] for c in queue] == [
                "queued message number 1",
                "queued message number 3",
                "edited on device two: e",
            ]
        elif label == "dragged":
            assert queue[2].startswith("queued message number 1")
        elif label == "removed":
            assert len(queue) == 2 and data["removed"] not in [preview(c) for c in queue]
        elif label == "resumed":
            assert api.query("session.get", {"sessionId": sid})["session"]["queuePaused"] is False
            assert len(queue) == 2  # resuming sends nothing while the model is still answering
        elif label == "drained":
            messages = api.messages(sid)
            users = [preview(m["content"]) for m in messages if m["role"] == "user"]
            assert users[1:] == [data["sentNow"], data["last"]] and queue == []
            # The answer in progress was stopped for the item sent now; both items were answered, once.
            server = [m for m in messages if m["role"] == "assistant"]
            assert [m["status"] for m in server] == ["interrupted", "complete", "complete"]
            assert data["answers"][0] == data["answers"][1] == texts(server)
        elif label == "cleared":
            assert queue == []

    seen = browser.run("queue_sync", check, token=web_server.tokens["alice"], sessionId=sid)
    no_problems(seen)
    assert seen["busyWhileQueued"] == "true"


def test_reload_and_a_cut_socket_mid_answer(web_server: WebServer, browser: Driver) -> None:
    api = web_server.api("alice")
    sid = api.mutate("session.create", {"title": "reload"})["id"]
    seen = browser.run("reload_and_drop", token=web_server.tokens["alice"], sessionId=sid)
    no_problems(seen)
    server = texts(answers(api, sid))
    assert len(server) == 2  # one answer per turn: nothing doubled by the reload or the reconnect
    assert seen["d1"] == server and seen["d2"] == server
    assert seen["streamingAfterReload"] == 1  # the reloaded tab picked the answer up mid-stream
    assert "reconnecting" in seen["states"] and seen["states"][-1] == "resumed"


def test_two_sessions_in_two_tabs_stay_apart(web_server: WebServer, browser: Driver) -> None:
    api = web_server.api("alice")
    s1 = api.mutate("session.create", {"title": "one"})["id"]
    s2 = api.mutate("session.create", {"title": "two"})["id"]
    seen = browser.run("isolation", token=web_server.tokens["alice"], s1=s1, s2=s2)
    no_problems(seen)
    assert "alpha" not in seen["bText"] and "beta" not in seen["aText"]
    assert seen["bQueue"] == [] and seen["bAssistants"] == 1 and seen["aAssistants"] == 2
    assert len(answers(api, s2)) == 1


def test_a_long_chat_opens_at_its_end_and_reads_back(web_server: WebServer, browser: Driver) -> None:
    api = web_server.api("alice")
    sid = api.mutate("session.create", {"title": "long"})["id"]
    notes = [f"note {i}" for i in range(450)]
    for i in range(0, len(notes), 64):
        api.mutate("message.addInstructions", {"sessionId": sid, "instructions": notes[i : i + 64], "respond": False})
    seen = browser.run("long_history", token=web_server.tokens["alice"], sessionId=sid)
    no_problems(seen)
    assert seen["first"] == notes[250:]  # session.get's newest page
    assert seen["focusKept"] is True  # focusing the button does not send the log back to its end
    assert seen["clicks"] == 2 and seen["all"] == notes  # two pages of message.list, each message once


def test_approval_on_one_device_shows_on_the_other(web_server: WebServer, browser: Driver) -> None:
    api = web_server.api("alice")
    sid = api.mutate(
        "session.create", {"tools": [{"name": "calculator", "executor": "server", "requiresApproval": True}]}
    )["id"]
    seen = browser.run("approval", token=web_server.tokens["alice"], sessionId=sid)
    no_problems(seen)
    assert '"expression": "6*7"' in seen["argsShown"]
    assert seen["approveLeftOnD1"] == 0
    # The other device names who decided: the deciding device's name when it has one.
    assert seen["decisionOnD1"].startswith("Approved on ") and "this device" not in seen["decisionOnD1"]
    assert seen["results"][0] == seen["results"][1] and "42" in seen["results"][0]
    assert seen["denialOnD2"].startswith("Denied on ") and "this device" not in seen["denialOnD2"]
    tool_results = [m for m in api.messages(sid) if m["role"] == "tool"]
    assert len(tool_results) == 2 and "42" in tool_results[0]["content"]
    assert "denied" in tool_results[1]["content"].lower()  # the model was told, not the calculator asked


def test_stop_from_the_other_device(web_server: WebServer, browser: Driver) -> None:
    api = web_server.api("alice")
    sid = api.mutate("session.create", {"title": "stop"})["id"]

    def check(label: str, data: dict[str, Any]) -> None:
        stopped = answers(api, sid)
        assert [m["status"] for m in stopped] == ["interrupted"]
        assert data["atStop"] == [texts(stopped), texts(stopped)]

    seen = browser.run("stop", check, token=web_server.tokens["alice"], sessionId=sid)
    no_problems(seen)
    server = answers(api, sid)
    assert seen["after"][0] == seen["after"][1] == texts(server)
    assert seen["after"][0][0] == seen["atStop"][0][0]  # no token after the stop
    # both browsers hold the same token, so the server sees one device stop it: each says "Stopped by you"
    stopped_by = api.messages(sid)[1]["stoppedBy"]
    assert stopped_by["userName"] == "alice" and stopped_by["deviceId"]
    assert seen["endings"] == [["Stopped by you"], ["Stopped by you"]]


def test_enter_while_composing_sends_nothing(web_server: WebServer, browser: Driver) -> None:
    api = web_server.api("alice")
    sid = api.mutate("session.create", {"title": "ime"})["id"]

    def check(label: str, data: dict[str, Any]) -> None:
        assert api.messages(sid) == [] and api.query("message.getQueuedMessages", {"sessionId": sid}) == []

    seen = browser.run("ime", check, token=web_server.tokens["alice"], sessionId=sid)
    no_problems(seen)
    assert seen["boxAfterComposingEnter"] == "にほんご"
    assert seen["boxAfterShiftEnter"] == "にほんご\n二行目"
    assert seen["boxAfterEnter"] == ""
    assert [m["content"] for m in api.messages(sid) if m["role"] == "user"] == ["にほんご\n二行目"]


def test_html_and_javascript_links_are_neutralised(web_server: WebServer, browser: Driver) -> None:
    api = web_server.api("alice")
    sid = api.mutate("session.create", {"title": "hostile"})["id"]
    content = (
        '<img src=x onerror="window.__hostile=1"> <script>window.__hostile=2</script> '
        "[click me](javascript:window.__hostile=3) and [fine](https://example.com/x)"
    )
    seen = browser.run("hostile", token=web_server.tokens["alice"], sessionId=sid, content=content)
    no_problems(seen)
    assert seen["ran"] is None and seen["injected"] == 0
    assert seen["userText"] == content
    assert "<img src=x" in seen["assistantText"]  # raw HTML in an answer is shown as text
    assert not any(h and h.lower().startswith("javascript:") for h in seen["hrefs"])
    assert "https://example.com/x" in seen["hrefs"]


def test_no_accessibility_violations(web_server: WebServer, browser: Driver) -> None:
    api = web_server.api("alice")
    sid = api.mutate("session.create", {"tools": [{"name": "calculator", "requiresApproval": True}]})["id"]
    api.mutate(
        "message.send",
        {"sessionId": sid, "content": "# Heading\n\nsome *text*\n/tool calculator {\"expression\": \"1+1\"}"},
    )
    api.mutate("message.pauseQueue", {"sessionId": sid})
    for i in range(2):
        api.mutate("message.enqueueMessage", {"sessionId": sid, "content": f"waiting in the queue {i} " * 4})
    seen = browser.run("accessibility", token=web_server.tokens["alice"], sessionId=sid)
    for scheme in ("light", "dark"):
        no_problems(seen[scheme])
        assert seen[scheme]["chat"] == [], seen[scheme]["chat"]
        assert seen[scheme]["devicesPage"] == [], seen[scheme]["devicesPage"]
    assert seen["light"]["background"] != seen["dark"]["background"]  # follows prefers-color-scheme


def test_phone_sized_screen(web_server: WebServer, browser: Driver) -> None:
    api = web_server.api("alice")
    sid = api.mutate("session.create", {"title": "phone"})["id"]
    api.mutate("message.send", {"sessionId": sid, "content": "a first message on a small screen"})
    seen = browser.run("phone", token=web_server.tokens["alice"], sessionId=sid)
    no_problems(seen)
    assert seen["overflow"] <= 0 and seen["navOverflow"] <= 0 and seen["chipOverflow"] <= 0
    assert seen["navHidden"] and seen["composerVisible"]
    assert seen["animation"] == "none"  # prefers-reduced-motion: the streaming cursor does not blink


def test_sidebar_follows_changes_from_anywhere(web_server: WebServer, browser: Driver) -> None:
    api = web_server.api("bob")
    made: dict[str, str] = {}

    def step(label: str, data: dict[str, Any]) -> None:
        if label == "open":
            made["id"] = api.mutate("session.create", {"title": "made elsewhere", "queuePaused": True})["id"]
            for text in ("first in line", "second in line"):
                api.mutate("message.enqueueMessage", {"sessionId": made["id"], "content": text})
        elif label == "created":
            api.mutate("message.clearQueue", {"sessionId": made["id"]})
            api.mutate("session.setTitle", {"sessionId": made["id"], "title": "renamed elsewhere"})
            api.mutate("message.send", {"sessionId": made["id"], "content": "answer for a little while " * 8})
        elif label == "renamed":
            session = api.query("session.get", {"sessionId": made["id"]})["session"]
            assert (session["title"], session["titleSource"]) == ("renamed here", "user")
        elif label == "deleted":
            assert made["id"] not in [s["id"] for s in api.query("session.list", {})["items"]]

    seen = browser.run("sidebar", step, token=web_server.tokens["bob"])
    no_problems(seen)


def test_a_steering_session_takes_what_is_typed_into_the_answer(web_server: WebServer, browser: Driver) -> None:
    api = web_server.api("alice")
    sid = api.mutate("session.create", {"busyPolicy": "steer"})["id"]
    seen = browser.run("steer", token=web_server.tokens["alice"], sessionId=sid)
    no_problems(seen)
    assert "adds your message to the current answer" in seen["hint"]
    assert seen["queueShown"] == 0
    messages = api.messages(sid)
    assert [m["content"] for m in messages if m["role"] == "user"][-1] == "steered while answering"
    assert api.query("message.getQueuedMessages", {"sessionId": sid}) == []
    assert len({m["runId"] for m in messages if m["role"] == "assistant"}) == 1  # one run answered both
