"""Device sign-in links in the web app, end to end in Chromium: a link names the account it signs in to and is
spent only when the person agrees, so a page that sends a signed-in person to someone else's link (login CSRF)
cannot switch their account; declining keeps the sign-in and leaves the code unspent, as the server confirms.
Scenarios are in client_js/browser/link_scenarios.mjs."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from web_support import Api, Driver, WebServer


def link_info(url: str, link: str) -> tuple[int, dict[str, Any]]:
    """``POST /auth/link/info`` for a link's code: the status and the answer (the code is not spent)."""
    code = link.split("#", 1)[1]
    req = urllib.request.Request(
        url + "/auth/link/info",
        data=json.dumps({"code": code}).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as res:
            return res.status, json.loads(res.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def pending(server: WebServer, user: str) -> list[str]:
    """The ids of ``user``'s links that are still unspent, as the server holds them."""
    return [link["id"] for link in server.api(user).query("auth.links")]


def test_device_link_signs_in_another_device_and_revoke_signs_it_out(web_server: WebServer, browser: Driver) -> None:
    seen = browser.run("device_link", token=web_server.tokens["bob"], account="bob")
    assert seen["problems"] == [], seen["problems"]
    assert "/link#" in seen["link"]
    assert seen["pendingShown"] == 1 and seen["pendingAfter"] == 0  # listed while waiting, gone once used
    # The code left the address bar ("/" then opens bob's newest chat when he has one).
    assert "/link" not in seen["addressAfter"] and "#" not in seen["addressAfter"]
    assert not seen["codeSentInUrl"]  # the fragment never reached the server
    assert seen["d2TokenSet"]
    assert len(seen["names"]) >= 2 and any("(this device)" in n for n in seen["names"])
    assert "revoked" in seen["d2Alert"]


def test_a_link_to_another_account_asks_and_declining_keeps_the_sign_in(web_server: WebServer, browser: Driver) -> None:
    """carol is signed in; a page sends her browser to a link of alice's."""
    link = web_server.api("alice").mutate("auth.createLink", {})

    def check(label: str, data: dict[str, Any]) -> None:
        assert link["id"] in pending(web_server, "alice"), label  # the code is unspent
        if label == "asked":
            assert data["heading"] == "Switch account?"
            assert "account alice" in data["text"] and "signed in as carol" in data["text"]
            assert data["focused"] == "Stay signed in as carol"  # Enter keeps the sign-in
            assert "#" not in data["address"]
        elif label == "stayed":
            assert data["kept"]
            # What carol typed next went to carol's account, not alice's.
            carol = web_server.api("carol").query("session.get", {"sessionId": data["sessionId"]})
            assert [m["content"] for m in carol["messages"] if m["role"] == "user"] == ["typed after staying signed in"]
            assert link_info(web_server.url, link["url"])[0] == 200

    seen = browser.run(
        "link_to_another_account",
        check,
        token=web_server.tokens["carol"],
        victim="carol",
        account="alice",
        link=link["url"],
    )
    # The one failed request is the spent link's look-up at the end (the server answers 400, documented).
    assert seen["problems"] == [
        "console: Failed to load resource: the server responded with a status of 400 (Bad Request)"
    ], seen["problems"]
    assert seen["axe"] == [], seen["axe"]
    assert not seen["codeSentInUrl"]
    assert "already used" in seen["spent"] and seen["stillSwitched"]  # a spent link opened again changes nothing
    # Accepted the second time: the browser is signed in as alice, with a new device; the code is spent.
    me = Api(web_server.url, seen["switched"]).query("auth.me")
    assert me["user"]["name"] == "alice"
    assert link["id"] not in pending(web_server, "alice")
    status, body = link_info(web_server.url, link["url"])
    assert status == 400 and "already used" in body["error"]["message"]


def test_a_link_opened_signed_out_names_the_account_before_it_is_spent(web_server: WebServer, browser: Driver) -> None:
    link = web_server.api("alice").mutate("auth.createLink", {"deviceName": "reading tablet"})

    def check(label: str, data: dict[str, Any]) -> None:
        assert link["id"] in pending(web_server, "alice"), label
        if label == "named":
            assert data["heading"] == "Sign in with a link"
            assert "account alice" in data["text"] and "“reading tablet”" in data["text"]
            assert data["focused"] == "Cancel"
        else:
            assert data["tokenAfterCancel"] is None

    seen = browser.run("link_signed_out", check, account="alice", link=link["url"])
    assert seen["problems"] == [], seen["problems"]
    assert link["id"] not in pending(web_server, "alice")  # spent (other tests may leave links of hers pending)
    devices = web_server.api("alice").query("auth.devices")
    assert "reading tablet" in [d["name"] for d in devices]  # the name chosen when the link was made


def test_devices_lists_pending_links_and_revokes_one(web_server: WebServer, browser: Driver) -> None:
    api = web_server.api("carol")
    made: dict[str, Any] = {}

    def check(label: str, data: dict[str, Any]) -> None:
        if label == "before":
            made["first"] = api.mutate("auth.createLink", {"deviceName": "garden laptop"})
        else:
            status, body = link_info(web_server.url, made["first"]["url"])
            assert status == 400 and "revoked" in body["error"]["message"]
            assert link_info(web_server.url, data["made"])[0] == 200
            assert len(pending(web_server, "carol")) == 1

    seen = browser.run("pending_links", check, token=web_server.tokens["carol"])
    assert seen["problems"] == [], seen["problems"]
    assert seen["axe"] == [], seen["axe"]
    assert "garden laptop" in seen["items"][0] and "(this device)" in seen["items"][0]
    assert "garden laptop" not in seen["left"][0]
    api.mutate("auth.revokeLink", {"linkId": pending(web_server, "carol")[0]})  # leave nothing pending
