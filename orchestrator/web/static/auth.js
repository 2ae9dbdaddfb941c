// The server's token and every call made with it. It is read once from the address's fragment (#token=...,
// which a browser never sends to a server nor puts in a Referer), taken out of the address bar, and kept for
// this tab only: in memory, and in sessionStorage so a reload still works. There is no cookie, so a page of
// any other origin (another port of 127.0.0.1 too) has nothing the browser would attach for it; every API
// call and the event stream send the token as `Authorization: Bearer`.
"use strict";

const TOKEN_KEY = "orchestrator-token";

const TOKEN = (() => {
  const given = new URLSearchParams(location.hash.slice(1)).get("token");
  if (given) {
    try { sessionStorage.setItem(TOKEN_KEY, given); } catch (e) { /* storage refused: this page only */ }
    history.replaceState(history.state, "", location.pathname + location.search);
    return given;
  }
  try { return sessionStorage.getItem(TOKEN_KEY) || ""; } catch (e) { return ""; }
})();

function noToken() {
  document.getElementById("no-token").hidden = false;
}

if (!TOKEN) noToken();

// An address of this app with the token in its fragment: for links a user may open in a new tab, which
// starts with an empty sessionStorage. The page it opens takes the token out of the address bar again.
function withToken(path) {
  return TOKEN ? `${path}#token=${encodeURIComponent(TOKEN)}` : path;
}

document.getElementById("home").href = withToken("/");

// A call to the API: `json` is sent as the body (the server takes no other kind on a write).
async function api(path, options = {}) {
  const headers = { Authorization: `Bearer ${TOKEN}`, ...(options.headers || {}) };
  const init = { method: options.method || "GET", headers, cache: "no-store", credentials: "omit",
                 referrerPolicy: "no-referrer", signal: options.signal };
  if (options.json !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(options.json);
  }
  const r = await fetch(path, init);
  if (r.status === 401) noToken();
  return r;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// An event stream read with fetch, since EventSource cannot send a header: the SSE format parsed as it
// arrives, and after any end or error a reconnect in the server's `retry:` time with Last-Event-ID, as
// EventSource does. `on.event(data)` gets each event's data; `on.open()`, `on.down()` and `on.gone(error)`
// (a refusal that no retry mends: no token, no such room) say how the link stands.
function follow(path, on) {
  let last = null;
  let retry = 1000;
  (async () => {
    for (;;) {
      try {
        const headers = { Accept: "text/event-stream" };
        if (last !== null) headers["Last-Event-ID"] = last;
        const r = await api(path, { headers });
        if (r.status === 401 || r.status === 404) {
          const e = await r.json().catch(() => ({ error: r.statusText }));
          on.gone(e.error);
          return;
        }
        if (!r.ok) {  // busy (429) or a server in trouble: try again later
          const wait = Number(r.headers.get("Retry-After"));
          throw new Error(`${r.status}`, { cause: wait > 0 ? wait * 1000 : retry });
        }
        on.open();
        const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
        let buffer = "";
        let data = [];
        let id = null;
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          const lines = (buffer + value).split("\n");
          buffer = lines.pop();
          for (let line of lines) {
            if (line.endsWith("\r")) line = line.slice(0, -1);
            if (line === "") {
              if (data.length) {
                if (id !== null) last = id;
                try { on.event(data.join("\n")); } catch (e) { console.error(e); }
              }
              data = [];
              continue;
            }
            if (line.startsWith(":")) continue;  // a ping
            const colon = line.indexOf(":");
            const field = colon < 0 ? line : line.slice(0, colon);
            let v = colon < 0 ? "" : line.slice(colon + 1);
            if (v.startsWith(" ")) v = v.slice(1);
            if (field === "data") data.push(v);
            else if (field === "id") id = v;
            else if (field === "retry" && /^\d+$/.test(v)) retry = Number(v);
          }
        }
        on.down();
        await sleep(retry);
      } catch (e) {
        on.down();
        await sleep(typeof e.cause === "number" ? e.cause : retry);
      }
    }
  })();
}
