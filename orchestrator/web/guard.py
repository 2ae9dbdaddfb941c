"""What every request to `orchestrator serve` passes before the app sees it (the Host and Origin it names, where
a browser says it comes from, its body's type and size) and the headers every answer carries.

The server's only secret is the token, which travels in an `Authorization` header no other page can make a
browser send; this layer is what keeps the browser itself from being turned against the server anyway:

- Host: a page on a name the attacker controls (DNS rebinding: evil.example first resolving to the attacker,
  then to 127.0.0.1) would be same-origin with the server; only the names this server was bound as are
  answered (421), so such a page gets nothing back at all.
- Origin and Sec-Fetch-Site: a page on another origin (another port of 127.0.0.1 is another origin, but the
  same *site*) is refused whenever the browser says so (403), except for a plain navigation to a page, whose
  shell holds no room data.
- A state-changing call takes `Content-Type: application/json` only (415): that is what no form and no
  `no-cors` fetch can send, so neither ever reaches the app.
- Bodies are read with a running total and refused past MAX_BODY (413) without holding more than that; a
  Content-Length over it is refused before anything is read.
- Every answer forbids framing, sniffing, referrers and caching, and says which scripts may run (no inline ones).
- A refusal is JSON for a script and a short page saying what to do for a person who opened the address.
"""
from __future__ import annotations

import html
import ipaddress
import socket
from dataclasses import dataclass
from typing import Any, Mapping
from urllib.parse import parse_qsl

import msgspec

MAX_BODY = 1024 * 1024  # bytes in one request body: a posted line (100,000 characters) is at most ~600 KB of JSON

CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "frame-ancestors 'none'; base-uri 'none'; form-action 'self'; object-src 'none'")
HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),  # nothing of a room is kept by the browser or a proxy
    (b"cross-origin-opener-policy", b"same-origin"),  # a page that opens this one gets no handle on it
    (b"cross-origin-resource-policy", b"same-origin"),  # nor can it embed a response as a script or an image
]
_REPLACED = {name for name, _ in HEADERS}
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_FOREIGN_SITES = frozenset({b"same-site", b"cross-site"})  # `same-site` is another port of 127.0.0.1


@dataclass(frozen=True)
class Hosts:
    """The `Host` headers this server answers to, for the address it was asked to bind.

    - a loopback address (127.0.0.1, ::1): that address and `localhost`, with the port;
    - one other address (192.0.2.7): that address only;
    - a name (`--host box.lan`, `localhost`): that name and the address it resolved to;
    - every interface (0.0.0.0, ::): any address typed as a number, `localhost`, and this machine's own names
      (`hostname`, its fully qualified name). Never another name: a DNS name pointed at this machine, which is
      what rebinding uses, is refused.

    The port is always the bound one (left out only for port 80, as browsers do).
    """

    names: frozenset[str]
    port: int
    any_address: bool = False

    @classmethod
    def bound(cls, host: str, port: int, address: str | None = None) -> Hosts:
        """`host` as given to --host; `address` the one it resolved to and the socket was bound to."""
        host = host.strip().lower().strip("[]")
        names = {host, *([address.lower()] if address else [])}
        try:
            ip = ipaddress.ip_address(address or host)
        except ValueError:
            ip = None
        if ip is not None and ip.is_unspecified:
            names |= {"localhost", socket.gethostname().lower(), socket.getfqdn().lower()}
            return cls(frozenset(_bracketed(n) for n in names), port, any_address=True)
        if host == "localhost" or (ip is not None and ip.is_loopback):
            names.add("localhost")
        return cls(frozenset(_bracketed(n) for n in names), port)

    def accepts(self, header: str) -> bool:
        name, port = _split(header.strip().lower())
        if port is None:
            port = 80 if self.port == 80 else None
        if port != self.port:
            return False
        if name in self.names:
            return True
        if self.any_address:
            try:
                ipaddress.ip_address(name.strip("[]"))
            except ValueError:
                return False
            return name.startswith("[") == (":" in name)  # an IPv6 address only in brackets
        return False

    def shown(self) -> str:
        said = [f"{n}:{self.port}" for n in sorted(self.names)]
        return ", ".join(said + ([f"any address of this machine with :{self.port}"] if self.any_address else []))


def _bracketed(name: str) -> str:
    return f"[{name}]" if ":" in name else name


def _split(header: str) -> tuple[str, int | None]:
    """`host:port`, `[v6]:port` or a bare name: the name as given (brackets kept) and the port."""
    if header.startswith("["):
        end = header.find("]")
        if end < 0:
            return header, None
        name, rest = header[:end + 1], header[end + 1:]
    else:
        name, _, port = header.rpartition(":")
        if not name:
            return port, None
        rest = ":" + port
    if not rest:
        return name, None
    if not rest.startswith(":") or not rest[1:].isdigit():
        return "", -1
    return name, int(rest[1:])


class Guard:
    """The pure ASGI middleware in front of the whole app (it sees streamed answers too)."""

    def __init__(self, app: Any, hosts: Hosts, max_body: int = MAX_BODY):
        self.app, self.hosts, self.max_body = app, hosts, max_body

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "websocket":  # none is served: refused before any app code runs
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        # An answer given before the request's body was read whole ends the connection: the server would drop
        # it anyway, and a client told so never sends its next request down a connection about to close.
        read = not _has_body(scope)
        if refusal := self.refusal(scope):
            await refuse(send, *refusal, close=not read, page=navigation(scope))
            return
        over = False
        total = 0
        started = False

        async def limited() -> dict:
            nonlocal over, total, read
            message = await receive()
            if message["type"] == "http.request":
                total += len(message.get("body", b""))
                if total > self.max_body:  # what arrived so far is dropped with this chunk; nothing more is read
                    over = True
                    raise _TooLarge
                read = read or not message.get("more_body", False)
            return message

        async def guarded(message: dict) -> None:
            nonlocal started
            if over:  # the app's own answer to a body it could not have is replaced by the 413 below
                return
            if message["type"] == "http.response.start":
                started = True
                message["headers"] = [*(h for h in message.get("headers", []) if h[0].lower() not in _REPLACED),
                                      *HEADERS, *([] if read else [(b"connection", b"close")])]
            await send(message)

        try:
            await self.app(scope, limited, guarded)
        except Exception:
            if not over:
                raise
        if over and not started:
            await refuse(send, 413, f"the request body is over {self.max_body} bytes", close=True)

    def refusal(self, scope: dict) -> tuple[int, str] | None:
        """Why this request is refused before the app sees it: (status, the one line said), or None."""
        headers: dict[bytes, bytes] = {}
        for name, value in scope["headers"]:
            headers.setdefault(name.lower(), value)
        host = headers.get(b"host", b"").decode("latin-1")
        if not self.hosts.accepts(host):
            return 421, (f"this server answers only to {self.hosts.shown()}, not to Host {host!r}: open the "
                         "address `orchestrator serve` printed")
        query = scope.get("query_string", b"").decode("latin-1")
        if any(k.lower() in ("token", "access_token") for k, _ in parse_qsl(query, keep_blank_values=True)):
            return 400, ("the token never goes in a query string: open the address `orchestrator serve` printed "
                         "(the token is in its #token= fragment), or send `Authorization: Bearer TOKEN`")
        origin = headers.get(b"origin")
        if origin is not None and origin.decode("latin-1").lower() != f"http://{host.lower()}":
            return 403, f"a page of another origin ({origin.decode('latin-1')}) may not call this server"
        method = scope["method"]
        site = headers.get(b"sec-fetch-site", b"").lower()
        navigation = method in ("GET", "HEAD") and headers.get(b"sec-fetch-mode", b"").lower() == b"navigate"
        if site in _FOREIGN_SITES and not navigation:
            return 403, f"a request from another site ({site.decode()}) may not call this server"
        if method in WRITES:
            kind = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
            if kind != b"application/json":
                return 415, "a call that changes anything takes a JSON body (Content-Type: application/json)"
        if (length := headers.get(b"content-length")) is not None:
            if not length.strip().isdigit():
                return 400, "a bad Content-Length"
            if int(length) > self.max_body:
                return 413, f"the request body is over {self.max_body} bytes"
        return None


class _TooLarge(Exception):
    """Raised into the app by its receive when the body passes the limit (the app is abandoned)."""


def _has_body(scope: dict) -> bool:
    for name, value in scope["headers"]:
        name = name.lower()
        if name == b"transfer-encoding" or (name == b"content-length" and value.strip() not in (b"0", b"")):
            return True
    return False


def navigation(scope: Mapping[str, Any]) -> bool:
    """Whether a person opened this address in a browser (typed, bookmarked, followed): then a refusal is a
    page that says what to do, not the JSON a script gets."""
    headers = dict((name.lower(), value) for name, value in scope["headers"])
    mode = headers.get(b"sec-fetch-mode")
    if mode is not None:
        return mode.lower() == b"navigate"
    return scope.get("method") == "GET" and b"text/html" in headers.get(b"accept", b"")


_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="referrer" content="no-referrer">
<title>{title} · orchestrator</title><link rel="icon" href="/favicon.ico"><link rel="stylesheet" href="/static/style.css">
</head><body><main class="refusal"><h1>{title}</h1><p>{text}</p>
<p>Open the address <code>orchestrator serve</code> printed when it started, as it is: it ends in
<code>#token=…</code>, which carries the token to this tab (<code>http://127.0.0.1:8765/#token=…</code>).
The terminal running <code>orchestrator serve</code> shows it; each start makes a new token unless
<code>[serve] token_file</code> in the config file keeps one, so that a bookmarked address goes on working.</p>
</main></body></html>
"""
_TITLES = {401: "This address needs the server's token", 421: "Not this server's address"}


def page_for(status: int, text: str) -> bytes:
    """The readable page a browser gets in place of a refusal's JSON."""
    title = _TITLES.get(status, "This request was refused")
    return _PAGE.format(title=html.escape(title), text=html.escape(text)).encode()


async def refuse(send: Any, status: int, text: str, *, close: bool, page: bool = False) -> None:
    body, kind = (page_for(status, text), b"text/html; charset=utf-8") if page else \
        (msgspec.json.encode({"error": text}), b"application/json")
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", kind), (b"content-length", str(len(body)).encode()),
        *([(b"connection", b"close")] if close or status == 421 else []), *HEADERS]})
    await send({"type": "http.response.body", "body": body})
