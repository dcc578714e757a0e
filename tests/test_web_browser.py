"""gitmem serve in a real browser: Debian's Chromium (/usr/bin/chromium, the ``chromium``
package) driven by Playwright for Python, its own browser download never used.

One browser for the module, not the session: Playwright's sync API keeps its event loop
running on the thread while it lives, so a test elsewhere that runs asyncio (the MCP tests)
cannot run beside it. Each test serves a store of its own. Every request the page
makes is intercepted: one to anywhere but the view fails the test, as does a dialog, a
console error (a blocked script is one) or a script that ran. Without Playwright or the
browser the tests skip, unless GITMEM_REQUIRE_BROWSER=1 (CI sets it) makes that a failure.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from storetools import plant
from test_web import HOSTILE, fill, start

from gitmem import Store

CHROMIUM = Path(os.environ.get("GITMEM_CHROMIUM", "/usr/bin/chromium"))
ARGS = [
    *("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run"),
    *("--disable-background-networking", "--disable-component-update", "--disable-sync"),
]
"""Without the background-networking flags Chromium dials out, which a closed network refuses."""
SCRIPT = "<script>window.pwned=1;alert(1)</script>"


def _unavailable(reason: str) -> None:
    if os.environ.get("GITMEM_REQUIRE_BROWSER") == "1":
        pytest.fail(f"GITMEM_REQUIRE_BROWSER=1 but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("Playwright is not installed (pip install playwright)")
    if not CHROMIUM.exists():
        _unavailable(f"no browser at {CHROMIUM} (apt-get install chromium)")
    home = tmp_path_factory.mktemp("browser-home")
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            home / "profile",
            executable_path=str(CHROMIUM),
            headless=True,
            args=ARGS,
            env={"HOME": str(home), "PATH": os.environ.get("PATH", "")},
        )
        yield context
        context.close()


@dataclass
class Site:
    page: Any
    url: str
    ids: dict[str, str]
    outside: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def visit(self, path: str) -> None:
        response = self.page.goto(self.url + path.lstrip("/"))
        assert response is not None and response.status == 200, path
        self.inert()

    def inert(self) -> None:
        """Nothing ran, asked, logged an error or left the page."""
        assert self.page.evaluate("window.pwned") is None
        assert self.dialogs == [] and self.errors == [] and self.outside == []


@pytest.fixture
def site(browser: Any, store: Store) -> Iterator[Site]:
    ids = fill(store)
    server = start(store.path)
    page = browser.new_page()
    view = Site(page, server.url, ids)

    def route(route: Any) -> None:
        if route.request.url.startswith(server.url):
            route.continue_()
        else:
            view.outside.append(route.request.url)
            route.abort()

    page.route("**/*", route)
    page.on("dialog", lambda d: (view.dialogs.append(d.message), d.dismiss()))
    page.on("console", lambda m: m.type == "error" and view.errors.append(m.text))
    page.on("pageerror", lambda exc: view.errors.append(str(exc)))
    yield view
    page.close()
    server.shutdown()
    server.server_close()


@pytest.mark.slow
def test_from_the_memories_page_through_history_to_a_diff(site: Site) -> None:
    page = site.page
    site.visit("/")
    page.get_by_role("link", name="Testing").click()
    assert page.inner_text("h1") == "Testing"
    assert page.inner_text(".body strong") == "fixtures"  # markdown, rendered
    assert "replaces" in page.inner_text(".links")
    page.get_by_role("link", name="v2 · update").click()
    assert "Use setUp and tearDown." in page.inner_text(".diff .add")
    assert "Use setUp." in page.inner_text(".diff .del")
    page.get_by_role("link", name="Testing").first.click()
    page.fill("input[name=at]", "HEAD~2")
    page.click("form.asof button")
    assert page.inner_text(".notice") == "As the store was at HEAD~2."
    site.visit("/")
    page.fill("input[name=q]", "how do we write fixtures?")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert page.get_by_role("link", name="Testing").count() == 1
    assert "fixture" in page.inner_text(".why")
    site.inert()


def test_audit_review_and_graph_open_and_link_to_memories(site: Site) -> None:
    page = site.page
    site.visit("/audit?agent=athena")
    assert page.locator("table.audit tbody tr").count() == 2
    site.visit("/review?range=HEAD~3..HEAD")
    assert page.locator("section.change").count() >= 2
    site.visit("/graph")
    assert page.locator("svg.graph g.node").count() >= 4
    page.locator("svg.graph a", has_text="Note").click()
    assert page.inner_text("h1") == "Note"
    site.inert()


@pytest.mark.slow
def test_hostile_memories_are_shown_as_text_and_nothing_in_them_runs(
    site: Site, store: Store
) -> None:
    page = site.page
    loud = store.create(HOSTILE, title=SCRIPT + '<img src=x onerror="window.pwned=2">',
                        tags=[SCRIPT, "<img src=x onerror=window.pwned=3>"], agent=SCRIPT,
                        category="<b onmouseover=window.pwned=4>c</b>",
                        session_id=SCRIPT)  # fmt: skip
    quiet = store.create("body", title="control")
    text = (store.path / str(quiet.path)).read_text()
    plant(store, str(quiet.path), text.replace("title: control", 'title: "bell\\a esc\\e[31m"'))
    plant(store, "projects/<script>window.pwned=5</script>/notes.md", "---\ntitle: p\n---\n")
    site.visit("/")
    listing = page.inner_text("table.memories")
    assert SCRIPT in listing and "bell\\x07 esc\\x1b[31m" in listing
    assert "projects/<script>window.pwned=5</script>/notes.md" in page.inner_text(".problems")
    page.get_by_role("link", name=SCRIPT, exact=False).click()
    site.inert()
    assert page.inner_text("h1").startswith(SCRIPT)
    assert page.locator(".body a").count() >= 3
    for link in page.locator(".body a").all():  # a link to elsewhere has lost its href
        href = link.get_attribute("href")
        assert href is None or href.startswith(("https:", "http:", "mailto:", "/"))
    page.locator(".body a", has_text="ok").hover()
    site.inert()
    site.visit(f"/memory/{quiet.id}")
    assert page.inner_text("h1") == "bell\\x07 esc\\x1b[31m"
    site.visit("/?q=script")
    site.visit("/audit")
    assert SCRIPT in page.inner_text("table.audit")
    site.visit("/graph")
    site.visit(f"/?agent={quote(str(loud.agent))}")
    assert page.locator("table.memories tbody tr").count() == 1
