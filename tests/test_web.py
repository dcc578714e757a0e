"""gitmem serve over plain HTTP: each page's JSON is the command line's, the view writes
nothing, and its checks hold (Host, Origin, methods, token, headers, sanitised markdown).
What a browser does with the pages is tests/test_web_browser.py."""

from __future__ import annotations

import http.client
import importlib.util
import json
import os
import re
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from storetools import status_porcelain, tip

import gitmem
import gitmem.cli
from gitmem import Store
from gitmem.base.errors import EXIT_CODES, install_command
from gitmem.features.graph import Graph
from tests.clitools import Gitmem, make_runner

pytest.importorskip("nh3", reason="gitmem serve needs the web extra")

from gitmem.entry.web import html
from gitmem.entry.web.server import CSP, Server

Answer = tuple[int, dict[str, str], bytes]


def fill(store: Store) -> dict[str, str]:
    """A few memories with a history: an update, a supersede, a related link, an entity."""
    first = store.create("Use setUp.", title="Testing", category="coding-preferences",
                         tags=["testing"], agent="hephaestus", session_id="s-1")  # fmt: skip
    store.update(first.id, "Use setUp and tearDown.", agent="hephaestus")
    newer = store.supersede(first.id, "Use **fixtures**.", agent="athena")
    note = store.create("See [the docs](https://example.com).", title="Note",
                        related=[(newer.id, "refines")], agent="athena")  # fmt: skip
    Graph(store).create_entities([{"name": "Alice", "entityType": "person", "observations": []}])
    return {"first": first.id, "newer": newer.id, "note": note.id}


def start(path: Path, **options: Any) -> Server:
    """A server on a free port, in a thread, over its own Store (one thread reads it)."""
    server = Server(gitmem.open(path), port=0, **options)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture
def served(store: Store) -> Iterator[tuple[Store, dict[str, str], Server]]:
    ids = fill(store)
    server = start(store.path)
    yield store, ids, server
    server.shutdown()
    server.server_close()


def get(
    server: Server, path: str, headers: dict[str, str] | None = None, method: str = "GET"
) -> Answer:
    host, port = server.server_address[:2]
    conn = http.client.HTTPConnection(str(host), int(port), timeout=30)
    try:
        conn.request(method, path, headers=headers or {})
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def as_json(server: Server, path: str) -> Any:
    status, headers, body = get(server, path, {"Accept": "application/json"})
    assert status == 200, body
    assert headers["Content-Type"] == "application/json"
    return json.loads(body)


def test_every_page_answers_json_in_the_command_lines_shapes(
    served: tuple[Store, dict[str, str], Server],
) -> None:
    store, ids, server = served
    cli = Gitmem(store.path, make_runner())
    assert as_json(server, "/") == cli.json("ls")
    page = as_json(server, f"/memory/{ids['newer']}")
    assert page["memory"] == cli.json("show", ids["newer"])
    assert page["history"] == cli.json("history", ids["newer"])
    assert as_json(server, "/audit?agent=athena") == cli.json("log", "--agent", "athena")
    assert as_json(server, "/review?range=HEAD~3..HEAD") == cli.json("review", "HEAD~3..HEAD")
    recalled = as_json(server, "/?q=fixtures&format=json")  # ?format=json works as Accept does
    assert [hit["id"] for hit in recalled["hits"]] == [ids["newer"]]
    assert as_json(server, "/?q=fix*")["mode"] == "fts"  # FTS5 syntax: search, as written
    graph = as_json(server, "/graph")
    assert {"entity:Alice", ids["first"], ids["newer"]} <= {n["key"] for n in graph["nodes"]}
    diff = as_json(server, f"/diff/{page['history']['versions'][1]['commit']}/{ids['first']}")
    assert "+Use setUp and tearDown." in diff["diff"]


def test_the_listing_follows_each_write_as_ls_does(
    served: tuple[Store, dict[str, str], Server],
) -> None:
    store, ids, server = served
    cli = Gitmem(store.path, make_runner())
    assert as_json(server, "/") == cli.json("ls")
    newest = store.supersede(ids["newer"], "Use factories.")
    store.delete(ids["note"])
    store.create("Fresh.", title="Fresh", tags=["new"])
    store.update(newest.id, "Use factory fixtures.", status="archived")
    assert as_json(server, "/") == cli.json("ls")
    assert as_json(server, "/?all=1") == cli.json("ls", "--all")
    assert as_json(server, "/?tag=new") == cli.json("ls", "--tag", "new")
    store.delete(newest.id)  # what it replaced is current again
    assert as_json(server, "/") == cli.json("ls")


def test_pages_write_nothing_and_carry_the_safety_headers(
    served: tuple[Store, dict[str, str], Server],
) -> None:
    store, ids, server = served
    before = tip(store)
    history = as_json(server, f"/memory/{ids['newer']}")["history"]["versions"]
    paths = ["/", "/?q=setUp", f"/memory/{ids['newer']}", f"/memory/{ids['first']}?at=HEAD~1",
             f"/diff/{history[-1]['commit']}/{ids['newer']}", "/audit", "/review",
             "/review?range=HEAD~2..HEAD", "/graph", f"/graph?id={ids['newer']}&depth=1",
             "/static/style.css"]  # fmt: skip
    for path in paths:
        status, headers, body = get(server, path)
        assert status == 200, (path, body[:300])
        assert headers["Content-Security-Policy"] == CSP
        assert headers["X-Content-Type-Options"] == "nosniff"
        assert headers["Referrer-Policy"] == "no-referrer"
        assert b"<script" not in body
    assert tip(store) == before
    assert status_porcelain(store) == ""
    for method in ("POST", "PUT", "DELETE"):
        assert get(server, "/", method=method)[0] == 405
    assert get(server, "/memory/mem_00000000-0000-4000-8000-000000000000")[0] == 404
    assert get(server, "/no-such-page")[0] == 404
    assert get(server, "/?page=x")[0] == 400
    assert get(server, "/memory/nothing", {"Accept": "application/json"})[2].startswith(b"{")


def test_host_and_origin_must_be_this_servers(
    served: tuple[Store, dict[str, str], Server],
) -> None:
    _, _, server = served
    port = server.server_address[1]
    # A DNS-rebinding page reaches 127.0.0.1 under its own name, and sends it.
    assert get(server, "/", {"Host": f"evil.example:{port}"})[0] == 421
    assert get(server, "/", {"Host": "127.0.0.1:1"})[0] == 421
    assert get(server, "/", {"Host": f"localhost:{port}"})[0] == 200
    assert get(server, "/", {"Origin": "http://evil.example"})[0] == 403
    assert get(server, "/", {"Origin": "null"})[0] == 403
    assert get(server, "/", {"Origin": f"http://127.0.0.1:{port}"})[0] == 200


def test_a_token_guards_the_view_when_asked(store: Store) -> None:
    token = "t" * 24
    server = start(store.path, token=token)
    try:
        assert get(server, "/")[0] == 401
        assert get(server, "/?token=wrong-wrong-wrong")[0] == 401
        assert get(server, "/", {"Authorization": f"Bearer {token}"})[0] == 200
        status, headers, _ = get(server, f"/audit?token={token}&agent=x")
        assert status == 303 and headers["Location"] == "/audit?agent=x"  # the URL drops it
        cookie = headers["Set-Cookie"].split(";")[0]
        assert "HttpOnly" in headers["Set-Cookie"] and "SameSite=Strict" in headers["Set-Cookie"]
        assert get(server, "/audit?agent=x", {"Cookie": cookie})[0] == 200
    finally:
        server.shutdown()
        server.server_close()


def test_another_host_than_loopback_makes_a_private_token(store: Store) -> None:
    server = start(store.path, host="0.0.0.0")
    try:
        assert server.token is not None and server.link.endswith(f"?token={server.token}")
        state = Path(os.environ["HOME"]) / ".local" / "state" / "gitmem" / "web-tokens"
        (kept,) = state.iterdir()
        assert stat.S_IMODE(kept.stat().st_mode) == 0o600
        assert kept.read_text().strip() == server.token
        assert get(server, "/")[0] == 401
        assert get(server, "/", {"Authorization": f"Bearer {server.token}"})[0] == 200
    finally:
        server.shutdown()
        server.server_close()


HOSTILE = (
    "<script>alert(1)</script>\n<img src=x onerror=alert(2)>\n"
    "[js](javascript:alert(3)) [d](data:text/html,<script>alert(4)</script>) "
    "![i](http://example.com/x.png) ![d](data:image/png;base64,AAAA) "
    '<a href="javascript:alert(5)">a</a> [ok](https://example.com) [own](/audit) '
    "[mail](mailto:a@example.com)\n\x1b[31mred\x07 \u202eevil\r\n"
)


def test_markdown_keeps_text_and_safe_links_only() -> None:
    out = str(html.markdown(HOSTILE))
    tags = re.findall(r"<[^>]*>", out)
    for bad in ("script", "img", "onerror", "javascript:", "data:"):
        assert not [tag for tag in tags if bad in tag], bad
    # An image would be a request leaving the page: it is drawn as a link to click.
    assert '!<a href="http://example.com/x.png" rel="noopener noreferrer nofollow">i</a>' in out
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in out  # shown as text
    assert '<a href="https://example.com" rel="noopener noreferrer nofollow">ok</a>' in out
    assert '<a href="/audit"' in out and '<a href="mailto:a@example.com"' in out
    assert "\\x1b[31mred\\x07 \\u202eevil" in out and "\x1b" not in out and "\u202e" not in out


def test_serve_starts_from_the_command_line(store: Store) -> None:
    fill(store)
    process = subprocess.Popen(
        [sys.executable, "-m", "gitmem", "--store", str(store.path), "serve", "--port", "0"],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        assert line.startswith(f"gitmem: serving a read-only view of {store.path} at http://")
        url = line.split(" at ")[-1].strip()
        host, port = url.removeprefix("http://").rstrip("/").rsplit(":", 1)
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        conn.request("GET", "/")
        response = conn.getresponse()
        assert response.status == 200 and b"Testing" in response.read()
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_serve_without_the_web_extra_says_what_to_install(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "nh3" else real(name, *a)
    )
    result = make_runner().invoke(gitmem.cli.cli, ["--store", str(store.path), "serve"])
    assert result.exit_code == EXIT_CODES["missing-dependency"]
    assert "nh3 (the web extra)" in result.stderr and install_command("web") in result.stderr
