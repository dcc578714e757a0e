"""``gitmem serve``: a read-only web view of a store, on the standard library's HTTP server.

GET and HEAD only; the Host (and any Origin) must name this server; off loopback every
request carries the token (``Authorization: Bearer``, or ``?token=`` once for a cookie);
every answer has a strict Content-Security-Policy. One worker thread builds every page, so
the store's connections are never shared between threads (docs/security.md).
"""

from __future__ import annotations

import contextlib
import hmac
import http.cookies
import ipaddress
import json
import socket
import webbrowser
from concurrent.futures import ThreadPoolExecutor
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from gitmem.base import logs
from gitmem.base.errors import GitmemError, InvalidInputError, NotFoundError
from gitmem.base.printable import printable_json
from gitmem.store.core import Store

log = logs.get(__name__)

TOKEN_ENV = "GITMEM_WEB_TOKEN"
TOKEN_DIR = "web-tokens"
COOKIE = "gitmem_web_token"
CSP = (
    "default-src 'self'; script-src 'none'; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}
_STATUS = {NotFoundError: 404, InvalidInputError: 400}


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an IP address or ``localhost``) is this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        raise InvalidInputError(f"host {host!r} is not an IP address or localhost") from None


class App:
    """Requests to answers: the pages of :class:`~gitmem.entry.web.pages.View`, drawn."""

    def __init__(self, store: Store) -> None:
        from gitmem.entry.web import html
        from gitmem.entry.web.pages import View

        self.view = View(store)
        self.env = html.environment()
        self.style = html.STYLE.read_bytes()
        self.store_path = str(store.path)

    def answer(self, path: str, params: dict[str, str], as_json: bool) -> tuple[int, str, bytes]:
        if path == "/static/style.css":
            return 200, "text/css", self.style
        try:
            page = self.view.page(path, params)
            if as_json:
                return 200, "application/json", _json(page.data())
            return 200, "text/html; charset=utf-8", self._render(page.template, page.context)
        except Exception as exc:
            if not isinstance(exc, GitmemError):
                log.exception("%s failed", path)
            status = next((s for t, s in _STATUS.items() if isinstance(exc, t)), 500)
            message = str(exc) if isinstance(exc, GitmemError) else "internal error (logged)"
            if as_json:
                return status, "application/json", _json({"error": message})
            context = {"status": status, "message": message, "params": params}
            return status, "text/html; charset=utf-8", self._render("error.html", context)

    def _render(self, template: str, context: dict[str, Any]) -> bytes:
        context = {**context, "store_path": self.store_path}
        return self.env.get_template(template).render(context).encode()


def _json(data: Any) -> bytes:
    return printable_json(json.dumps(data, indent=2, ensure_ascii=False, default=str)).encode()


class Server(ThreadingHTTPServer):
    """The view of ``store`` on ``host``:``port`` (0: any free port; :attr:`url` says which)."""

    daemon_threads = True

    def __init__(
        self, store: Store, host: str = "127.0.0.1", port: int = 8765, token: str | None = None
    ) -> None:
        if token is None and not is_loopback(host):
            from gitmem.entry.tokens import http_token

            token = http_token(store, env=TOKEN_ENV, folder=TOKEN_DIR)[0]
        if ":" in host:
            self.address_family = socket.AF_INET6
        super().__init__((host.strip("[]"), port), Handler)
        self.app = App(store)
        self.worker = ThreadPoolExecutor(1, thread_name_prefix="gitmem-web")
        self.worker.submit(self.app.view.refresh)  # the listing read while nobody waits
        self.token = token
        port = self.server_address[1]
        shown = f"[{host}]" if ":" in host else host
        names = {shown, "127.0.0.1", "localhost", "[::1]"} if is_loopback(host) else {shown}
        # Bound to every address: the token is the check (any name may reach it).
        self.hosts = None if host in ("0.0.0.0", "::") else {f"{n}:{port}" for n in names}
        self.origins = {f"http://{h}" for h in self.hosts or ()}
        self.url = f"http://{shown}:{port}/"
        self.link = self.url + (f"?token={token}" if token else "")
        """The URL to open: with the token when there is one."""

    def run(self, *, open_browser: bool = False) -> None:
        """Serve until interrupted (Ctrl-C)."""
        if open_browser:
            webbrowser.open(self.link)
        with self, contextlib.suppress(KeyboardInterrupt):  # the server closes on leaving
            self.serve_forever()

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("a connection from %s failed", client_address, exc_info=True)

    def server_close(self) -> None:
        super().server_close()
        self.worker.shutdown(wait=False, cancel_futures=True)


class Handler(BaseHTTPRequestHandler):
    server: Server
    protocol_version = "HTTP/1.1"
    server_version = "gitmem"
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)

    def do_GET(self) -> None:
        self._answer(head=False)

    def do_HEAD(self) -> None:
        self._answer(head=True)

    def _read_only(self) -> None:
        self._send(405, "text/plain", b"read-only: only GET and HEAD\n", {"Allow": "GET, HEAD"})

    do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = _read_only

    def _answer(self, head: bool) -> None:
        server = self.server
        host = self.headers.get("Host", "").lower()
        if server.hosts is not None and host not in server.hosts:
            return self._send(421, "text/plain", b"unknown Host\n")
        origin = self.headers.get("Origin")
        if origin is not None and origin.lower() not in (server.origins or {f"http://{host}"}):
            return self._send(403, "text/plain", b"cross-origin request refused\n")
        url = urlsplit(self.path)
        params = dict(parse_qsl(url.query))
        accept = self.headers.get("Accept", "")
        as_json = params.pop("format", "") == "json" or accept.startswith("application/json")
        if server.token is not None:
            given = params.pop("token", None)
            if not self._authorised(server.token, given):
                return self._send(401, "text/plain", b"a token is needed\n")
            if given is not None and not as_json:  # from the URL once; a cookie from then on
                query = urlencode(params)
                cookie = f"{COOKIE}={given}; HttpOnly; SameSite=Strict; Path=/"
                where = url.path + (f"?{query}" if query else "")
                return self._send(303, "text/plain", b"", {"Location": where, "Set-Cookie": cookie})
        status, kind, body = server.worker.submit(
            server.app.answer, url.path, params, as_json
        ).result()
        self._send(status, kind, body, head=head)

    def _authorised(self, token: str, given: str | None) -> bool:
        candidates = [given] if given is not None else []
        auth = self.headers.get("Authorization", "")
        if auth.startswith("Bearer "):
            candidates.append(auth[7:])
        cookie = http.cookies.SimpleCookie()
        with contextlib.suppress(http.cookies.CookieError):
            cookie.load(self.headers.get("Cookie", ""))
        if COOKIE in cookie:
            candidates.append(cookie[COOKIE].value)
        return any(hmac.compare_digest(c.encode(), token.encode()) for c in candidates)

    def _send(
        self,
        status: int,
        kind: str,
        body: bytes,
        extra: dict[str, str] | None = None,
        head: bool = False,
    ) -> None:
        self.send_response(status, HTTPStatus(status).phrase)
        for name, value in {**HEADERS, **(extra or {})}.items():
            self.send_header(name, value)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)
