"""A hostile store, met the way a user meets it: every command, the hooks and the MCP server
run as real subprocesses with a time bound.

What a teammate pushes, or a cloned project carries, reaches gitmem as files in the
store. None of it may crash gitmem (a signal exit, "unexpected ... please report it"),
hang it past a bound, or make it create a file outside the scratch directory. Each
program runs as its own process, so a segfault fails a test instead of killing pytest.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from storetools import plant, run_git, tip

from gitmem import Store
from gitmem import hooks as gh
from gitmem.errors import EXIT_CODES
from gitmem.layout import memory_path

# Exit codes a command may end with: the documented ones, 0, and 8 ("review --strict found
# problems"). Anything else, and any negative code (killed by a signal), is a crash.
ALLOWED_CODES = set(EXIT_CODES.values()) | {0, 8}
BOUND = 60.0  # seconds one command may take before it counts as a hang
CRASH_MARKERS = ("Traceback (most recent call last)", "please report", "Segmentation fault",
                 "core dumped", "Fatal Python error")

INDICATOR_BOMB = "---\n" + "? " * 26_000 + "a\n---\nbody\n"
BOMB_ID = "mem_0b000000-0000-4000-8000-00000000b0b0"


def gitmem(
    *args: str, cwd: Path, input: bytes | None = None, timeout: float = BOUND
) -> subprocess.CompletedProcess[str]:
    """``python -m gitmem ARGS`` as a process of its own; a hang past ``timeout`` fails."""
    try:
        done = subprocess.run(
            [sys.executable, "-m", "gitmem", *args],
            cwd=cwd,
            input=input,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"gitmem {' '.join(args)} ran past {timeout} s")
    return subprocess.CompletedProcess(
        done.args,
        done.returncode,
        done.stdout.decode("utf-8", "replace"),
        done.stderr.decode("utf-8", "replace"),
    )


def survived(result: subprocess.CompletedProcess[str], what: str) -> None:
    """No signal, a documented exit code, and no crash report on stderr."""
    code = result.returncode
    if code < 0:
        pytest.fail(f"{what} was killed by {signal.Signals(-code).name}\n{result.stderr[-2000:]}")
    assert code in ALLOWED_CODES, f"{what} exited {code}\n{result.stderr[-2000:]}"
    for marker in CRASH_MARKERS:
        assert marker not in result.stderr, f"{what}: {marker!r}\n{result.stderr[-2000:]}"


class McpSession:
    """The MCP server as a subprocess, spoken to in raw JSON-RPC lines over stdio.

    No SDK client: what matters here is the server process surviving whatever the
    store holds, and the raw protocol keeps the test fast.
    """

    def __init__(self, store: Path, cwd: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gitmem", "--store", str(store), "mcp"],
            cwd=cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.stderr = b""
        threading.Thread(target=self._pump, daemon=True).start()
        self.next_id = 1
        self.request("initialize", {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "hostile-store-test", "version": "1"},
        })
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(b"")

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        ident = self.next_id
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": ident, "method": method, "params": params})
        while True:
            try:
                line = self.lines.get(timeout=BOUND)
            except queue.Empty:
                pytest.fail(f"the MCP server did not answer {method} within {BOUND} s")
            if not line:
                code = self.proc.wait(timeout=BOUND)
                pytest.fail(f"the MCP server exited ({code}) during {method}: {self.stderr_text()}")
            message: dict[str, Any] = json.loads(line)
            if message.get("id") == ident:
                return message

    def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """A tool call's result; a tool error is fine, a protocol error or a crash is not."""
        answer = self.request("tools/call", {"name": tool, "arguments": arguments})
        assert "result" in answer, answer
        result: dict[str, Any] = answer["result"]
        for block in result.get("content", []):
            for marker in CRASH_MARKERS:
                assert marker not in block.get("text", ""), (tool, block)
        return result

    def stderr_text(self) -> str:
        return self.stderr.decode("utf-8", "replace")[-2000:]

    def close(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            code = self.proc.wait(timeout=BOUND)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            pytest.fail("the MCP server did not exit when its input closed")
        assert self.proc.stderr is not None
        self.stderr = self.proc.stderr.read()
        return code


def mcp_session(store: Path, cwd: Path, calls: Sequence[tuple[str, dict[str, Any]]]) -> list[
    dict[str, Any]
]:
    session = McpSession(store, cwd)
    try:
        results = [session.call(tool, args) for tool, args in calls]
    finally:
        code = session.close()
    assert code >= 0, f"the MCP server was killed by a signal: {session.stderr_text()}"
    for marker in CRASH_MARKERS:
        assert marker not in session.stderr_text(), session.stderr_text()
    return results


@pytest.fixture
def scratch(tmp_path: Path) -> Iterator[Path]:
    """A working directory for the subprocesses, checked for strays afterwards."""
    work = tmp_path / "cwd"
    work.mkdir()
    yield work
    assert not list(tmp_path.parent.rglob("PWNED*")), "a file was written outside the store"


# -- reproduction 3: a front-matter of 26,000 "? " indicators ---------------------------------


def test_indicator_bomb_crashes_no_command(store: Store, scratch: Path) -> None:
    """It killed ls, search, doctor, reindex, the pre-commit hook and the MCP server with
    SIGSEGV (libyaml composes recursively in C, and the text passed the old depth guess)."""
    good = store.create("a good neighbour", title="neighbour")
    plant(store, memory_path(BOMB_ID), INDICATOR_BOMB, "indicator bomb")
    where = ("--store", str(store.path))
    listed = gitmem(*where, "ls", "--json", cwd=scratch)
    survived(listed, "ls")
    assert [m["id"] for m in json.loads(listed.stdout)] == [good.id]
    for args in (["search", "neighbour"], ["search", "--regex", "nei.h"], ["doctor"],
                 ["reindex"], ["show", BOMB_ID], ["validate"]):
        survived(gitmem(*where, *args, cwd=scratch), " ".join(args))
    assert "nested deeper" in gitmem(*where, "show", BOMB_ID, cwd=scratch).stderr

    results = mcp_session(store.path, scratch, [
        ("recall", {"query": "neighbour"}),
        ("get_memory", {"id": BOMB_ID}),
        ("get_memory", {"id": good.id}),
        ("read_graph", {}),
        ("recall", {"query": "nei.h", "mode": "regex"}),
        # The same text as an argument: a body is text, never parsed as YAML.
        ("remember", {"content": INDICATOR_BOMB, "title": "the bomb as text"}),
        ("recall", {"query": "bomb as text"}),
    ])
    assert not results[0].get("isError") and good.id in json.dumps(results[0])
    assert results[1].get("isError")
    assert not results[2].get("isError")
    assert good.id in json.dumps(results[4])
    assert not results[5].get("isError"), results[5]
    assert "the bomb as text" in json.dumps(results[6])


def test_indicator_bomb_is_refused_by_the_pre_commit_hook(store: Store) -> None:
    gh.install(store.path, "memory")
    other = "mem_0c000000-0000-4000-8000-00000000b0b1"
    path = store.path / memory_path(other)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(INDICATOR_BOMB)
    run_git(store.path, "add", "--", memory_path(other))
    before = tip(store)
    commit = subprocess.run(
        ["git", "commit", "-m", "bomb"], cwd=store.path, capture_output=True, text=True,
        timeout=BOUND, check=False, env={**os.environ, "LC_ALL": "C"},
    )
    assert commit.returncode != 0 and tip(store) == before
    assert memory_path(other) in commit.stderr and "nested deeper" in commit.stderr, commit.stderr
    for marker in CRASH_MARKERS:
        assert marker not in commit.stderr
    # The hook's own program, as the script runs it: a clean refusal, not a signal.
    hook = gitmem("hook-run", "--role", "memory", "pre-commit", cwd=store.path)
    survived(hook, "hook-run pre-commit")
    assert hook.returncode != 0

