"""The ``/admin`` page: a token field, the session list, one session's detail and event log.

Plain DOM calls against the JSON API; everything a user wrote (titles, messages) is set with
``textContent``, never parsed as HTML. The token stays in this tab (``sessionStorage``). ``{nonce}`` is
replaced per response and matches the Content-Security-Policy header.
"""

PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>chatsync admin</title>
<style nonce="{nonce}">
body { font: 14px system-ui, sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid #ddd; vertical-align: top; }
tr.row { cursor: pointer; } tr.row:hover { background: #f3f6fa; }
pre { background: #f6f6f6; padding: 8px; overflow: auto; max-height: 40em; }
#error { color: #b00020; } .muted { color: #777; }
</style>
</head>
<body>
<h1>chatsync admin</h1>
<form id="auth"><label>Admin token <input id="token" type="password" size="50" autocomplete="off"></label>
<button>Use</button></form>
<p id="error"></p>
<section id="stats"></section>
<h2>Sessions</h2>
<form id="filter"><label>Owner <input id="owner" size="20"></label>
<label>Status <select id="status"><option value="">any</option><option>idle</option><option>running</option>
<option>requires-action</option><option>error</option></select></label> <button>Filter</button></form>
<table><thead><tr><th>Title</th><th>Owner</th><th>Status</th><th>Queue</th><th>Last event</th><th>Updated</th>
<th>Id</th></tr></thead><tbody id="sessions"></tbody></table>
<button id="more" hidden>More</button>
<section id="detail" hidden><h2 id="detail-title"></h2><h3>Session</h3><pre id="detail-json"></pre>
<h3>Event log</h3><pre id="events"></pre><button id="more-events" hidden>More events</button></section>
<script nonce="{nonce}">
"use strict";
const $ = (id) => document.getElementById(id);
let cursor = null, eventsAfter = null, current = null;

async function api(path) {
  const res = await fetch(path, {headers: {Authorization: "Bearer " + sessionStorage.getItem("chatsync-token")}});
  const body = await res.json();
  if (!res.ok) throw new Error(body.error ? body.error.code + ": " + body.error.message : res.statusText);
  return body;
}
function cell(tr, text) { const td = document.createElement("td"); td.textContent = text; tr.appendChild(td); }
function when(ms) { return ms ? new Date(ms).toLocaleString() : ""; }
function fail(err) { $("error").textContent = String(err.message || err); }

async function loadStats() {
  const s = await api("/admin/api/stats");
  const sessions = Object.entries(s.database.sessions).map(([k, v]) => k + " " + v).join(", ") || "none";
  $("stats").textContent = "Sessions: " + sessions + " | queued messages: " + s.database.queuedMessages +
    " | users: " + s.database.users + " | this replica: " + s.replica.webSocketConnections +
    " connections, " + s.replica.subscriptions + " subscriptions, " + s.replica.runningSessions.length +
    " running";
}
async function loadSessions(reset) {
  if (reset) { cursor = null; $("sessions").textContent = ""; }
  const q = new URLSearchParams({limit: "50"});
  if ($("owner").value) q.set("owner", $("owner").value);
  if ($("status").value) q.set("status", $("status").value);
  if (cursor) q.set("cursor", cursor);
  const page = await api("/admin/api/sessions?" + q);
  for (const s of page.items) {
    const tr = document.createElement("tr"); tr.className = "row";
    cell(tr, s.title || "(untitled)"); cell(tr, s.owner.name); cell(tr, s.status + (s.queuePaused ? " (queue paused)" : ""));
    cell(tr, String(s.queueLength)); cell(tr, String(s.lastSeq)); cell(tr, when(s.updatedAt)); cell(tr, s.id);
    tr.addEventListener("click", () => showSession(s.id).catch(fail));
    $("sessions").appendChild(tr);
  }
  cursor = page.nextCursor; $("more").hidden = !cursor;
}
async function showSession(id) {
  current = id; eventsAfter = 0;
  const d = await api("/admin/api/sessions/" + encodeURIComponent(id));
  $("detail").hidden = false;
  $("detail-title").textContent = d.snapshot.session.title || id;
  $("detail-json").textContent = JSON.stringify(d, null, 2);
  $("events").textContent = "";
  await loadEvents();
}
async function loadEvents() {
  const page = await api("/admin/api/sessions/" + encodeURIComponent(current) + "/events?limit=200&after=" + eventsAfter);
  for (const e of page.items) $("events").textContent += e.seq + " " + e.type + " " + JSON.stringify(e.event) + "\\n";
  eventsAfter = page.nextAfter; $("more-events").hidden = eventsAfter === null;
}
async function refresh() { $("error").textContent = ""; await loadStats(); await loadSessions(true); }

$("auth").addEventListener("submit", (e) => { e.preventDefault(); sessionStorage.setItem("chatsync-token", $("token").value); $("token").value = ""; refresh().catch(fail); });
$("filter").addEventListener("submit", (e) => { e.preventDefault(); loadSessions(true).catch(fail); });
$("more").addEventListener("click", () => loadSessions(false).catch(fail));
$("more-events").addEventListener("click", () => loadEvents().catch(fail));
if (sessionStorage.getItem("chatsync-token")) refresh().catch(fail);
</script>
</body>
</html>
"""
