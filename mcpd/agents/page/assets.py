"""The page's style and script, and the headers that let the browser run nothing else.

Both are inlined in the page, so the page is one response with no assets to fetch;
the Content-Security-Policy admits them by their SHA-256 digests, and nothing else:
no other script or style, no frame, no form or fetch to another origin.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Final

STYLE: Final = """
:root{color-scheme:light dark;--bg:#f6f8fa;--card:#fff;--fg:#1f2328;--muted:#59636e;
--line:#d1d9e0;--up:#1a7f37;--warn:#9a6700;--down:#cf222e;--person:#8250df;--idle:#0969da;
--off:#818b98;--tint:rgba(207,34,46,.07);--ptint:rgba(130,80,223,.07)}
@media (prefers-color-scheme:dark){:root{--bg:#0d1117;--card:#151b23;--fg:#e6edf3;
--muted:#9198a1;--line:#3d444d;--up:#3fb950;--warn:#d29922;--down:#f85149;--person:#a371f7;
--idle:#4493f8;--off:#6e7681;--tint:rgba(248,81,73,.10);--ptint:rgba(163,113,247,.10)}}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);
font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
header,main,footer{max-width:1440px;margin:0 auto;padding:0 20px}
header{display:flex;flex-wrap:wrap;align-items:baseline;gap:4px 16px;padding-top:18px}
h1{font-size:20px;margin:0}h2{font-size:15px;margin:0 0 8px}
#summary{margin:0;color:var(--muted);flex:1}
.live{font-size:12px;color:var(--muted)}.live.on::before{content:"\\25CF ";color:var(--up)}
.live.off::before{content:"\\25CF ";color:var(--off)}
section{background:var(--card);border:1px solid var(--line);border-radius:8px;
padding:14px 16px;margin:14px 0}
small,.muted{color:var(--muted)}small{display:block;font-size:12px}
code{font:12px ui-monospace,SFMono-Regular,Menlo,monospace;background:var(--bg);
border:1px solid var(--line);border-radius:4px;padding:1px 5px;overflow-wrap:anywhere}
.warning{color:var(--warn);margin:4px 0 0}
table{width:100%;border-collapse:collapse}
th,td{text-align:left;padding:7px 8px;border-top:1px solid var(--line);vertical-align:top}
thead th{border-top:0;font-size:12px;font-weight:600;color:var(--muted);white-space:nowrap}
th.n,td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
tbody tr{border-left:4px solid transparent}
tr.down{background:var(--tint);border-left-color:var(--down)}
tr.person{background:var(--ptint);border-left-color:var(--person)}
tr.warn{border-left-color:var(--warn)}
.name{font-weight:600;overflow-wrap:anywhere}
.why{max-width:34ch;overflow-wrap:anywhere}
.pill{display:inline-block;border-radius:10px;padding:0 8px;font-size:12px;font-weight:600;
color:#fff;white-space:nowrap}
.pill.up{background:var(--up)}.pill.warn{background:var(--warn)}
.pill.down{background:var(--down)}.pill.person{background:var(--person)}
.pill.idle{background:var(--idle)}.pill.off{background:var(--off)}
svg{display:block}.spark{width:120px;height:28px}.day{width:100%;min-width:180px;height:16px}
.track{fill:var(--bg);stroke:var(--line);stroke-width:.5}
rect.up{fill:var(--up)}rect.warn{fill:var(--warn)}rect.down{fill:var(--down)}
rect.person{fill:var(--person)}rect.idle{fill:var(--idle)}rect.off{fill:var(--off)}
.p95{fill:none;stroke:var(--idle);stroke-width:1;opacity:.45}
.p50{fill:none;stroke:var(--idle);stroke-width:1.5}
.err{fill:var(--down)}
.ticks{fill:var(--muted);font-size:10px;display:flex;justify-content:space-between}
ul.waits{list-style:none;margin:0;padding:0}
ul.waits li{display:flex;flex-wrap:wrap;gap:6px 12px;align-items:center;padding:8px 0;
border-top:1px solid var(--line)}ul.waits li:first-child{border-top:0}
form{display:inline}
button{font:inherit;font-weight:600;color:#fff;background:var(--person);border:0;
border-radius:6px;padding:4px 12px;cursor:pointer}
button:focus-visible{outline:2px solid var(--idle);outline-offset:2px}
output{font-size:12px;color:var(--muted)}output a{color:var(--idle)}
button.no{background:var(--down)}
pre.diff{flex-basis:100%;margin:0;font-size:12px;white-space:pre-wrap;
overflow-wrap:anywhere;background:var(--bg);border:1px solid var(--line);border-radius:4px;
padding:6px}
pre.diff.cut{max-height:16em;overflow:auto}
form.filter{display:flex;gap:8px;margin:0 0 8px}
select{font:inherit;color:var(--fg);background:var(--card);border:1px solid var(--line);
border-radius:6px;padding:2px 6px}
footer{color:var(--muted);font-size:12px;padding-bottom:24px}
@media (max-width:760px){
header,main,footer{padding:0 10px}header{padding-top:12px}
section{padding:10px}
table.servers thead{display:none}
table.servers,table.servers tbody,table.servers tr{display:block}
table.servers tr{display:grid;grid-template-columns:1fr 1fr;gap:2px 12px;padding:8px 6px;
border-top:1px solid var(--line)}
table.servers th,table.servers td{border:0;padding:2px 0}
table.servers th,table.servers td.state,table.servers td.chart{grid-column:1/-1}
table.servers td.n{text-align:left}.spark{width:100%}
table.servers td[data-label]::before{content:attr(data-label) ": ";color:var(--muted);
font-size:12px}
.why{max-width:none}
}
""".strip()

SCRIPT: Final = """
"use strict";
(() => {
  const live = document.getElementById("live");
  const csrf = document.querySelector('meta[name="mcpd-csrf"]');
  const say = (text, how) => { live.textContent = text; live.className = "live " + how; };
  const listen = () => {
    const events = new EventSource("/page/events" + location.search);
    events.onopen = () => say("live", "on");
    events.onmessage = (ev) => {
      for (const [id, html] of Object.entries(JSON.parse(ev.data))) {
        if (id === "title") { document.title = html; continue; }
        const el = document.getElementById(id);
        if (el) el.innerHTML = html;
      }
    };
    events.onerror = () => {
      if (events.readyState === EventSource.CLOSED) {
        say("not live: reload, or run mcpd dashboard for a new session", "off");
      } else {
        say("reconnecting\\u2026", "off");
      }
    };
  };
  document.addEventListener("submit", async (ev) => {
    const form = ev.target;
    // A form that asks for a page (the calls' filter) is the browser's to follow.
    if (!(form instanceof HTMLFormElement) || form.method !== "post" || !csrf) return;
    ev.preventDefault();
    const out = form.querySelector("output") || form;
    out.textContent = "starting\\u2026";
    try {
      const reply = await fetch(form.action, {
        method: "POST",
        headers: { "x-mcpd-csrf": csrf.content, "accept": "application/json" },
        body: new URLSearchParams(new FormData(form)),
        credentials: "same-origin",
      });
      const body = await reply.json();
      if (!reply.ok) throw new Error(body.error || reply.statusText);
      if (body.url) {
        const link = document.createElement("a");
        link.href = body.url;
        link.target = "_blank";
        link.rel = "noopener noreferrer";
        link.textContent = "open the login page";
        out.replaceChildren("log in there, then come back: ", link);
        window.open(body.url, "_blank", "noopener,noreferrer");
      } else {
        out.textContent = body.message || "done";
      }
    } catch (err) {
      out.textContent = "failed: " + err.message;
    }
  });
  say("connecting\\u2026", "off");
  listen();
})();
""".strip()


def _digest(text: str) -> str:
    return base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()


CSP: Final = (
    "default-src 'none'; "
    f"script-src 'sha256-{_digest(SCRIPT)}'; "
    f"style-src 'sha256-{_digest(STYLE)}'; "
    "img-src data:; connect-src 'self'; form-action 'self'; base-uri 'none'; "
    "frame-ancestors 'none'"
)
# A small mark for the tab, drawn inline: a request for /favicon.ico would be a 404
# in the browser's console.
ICON: Final = (
    "data:image/svg+xml,%3Csvg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 16 16'%3E"
    "%3Ccircle cx='8' cy='8' r='6' fill='%231a7f37'/%3E%3C/svg%3E"
)

SECURITY_HEADERS: Final = [
    (b"content-security-policy", CSP.encode()),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
]
# An event stream says no-cache itself.
STREAM_HEADERS: Final = [h for h in SECURITY_HEADERS if h[0] != b"cache-control"]
