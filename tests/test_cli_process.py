"""The command line as a user runs it: real processes of the installed ``gitmem``.

These run the console script (or ``python -m gitmem`` when the script is not
next to the interpreter), so the entry point, stdin/stdout bytes, exit codes
and the absence of tracebacks are checked end to end, including the README's
demo command.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from clitools import one_line_error
from conftest import GitRunner

import gitmem
from gitmem.format.layout import memory_path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = Path(sys.executable).parent / "gitmem"


def gitmem_command() -> list[str]:
    if SCRIPT.is_file() and os.access(SCRIPT, os.X_OK):
        return [str(SCRIPT)]
    return [sys.executable, "-m", "gitmem"]


def run(
    *args: str,
    cwd: Path,
    input: bytes | None = None,
    env: dict[str, str] | None = None,
    command: list[str] | None = None,
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [*(command or gitmem_command()), *args],
        cwd=cwd,
        input=input,
        capture_output=True,
        env={**os.environ, **(env or {})},
        check=False,
        timeout=120,
    )


def test_write_read_and_fail_through_the_console_script(tmp_path: Path, git: GitRunner) -> None:
    store = tmp_path / "store"
    assert run("init", str(store), cwd=tmp_path).returncode == 0
    body = "piped body\r\nwith ünïcode and no final newline".encode()
    added = run("--store", str(store), "add", "-", "--title", "Piped", input=body, cwd=tmp_path)
    assert added.returncode == 0, added.stderr
    memory_id = added.stdout.decode().strip()
    shown = run("--store", str(store), "show", memory_id, cwd=tmp_path)
    assert shown.returncode == 0
    path = memory_path(memory_id)
    as_git_has_it = subprocess.run(
        ["git", "-C", str(store), "show", f"HEAD:{path}"], capture_output=True, check=True
    )
    stored = as_git_has_it.stdout
    assert stored == (store / path).read_bytes() and b"version" not in stored
    head, _, rest = stored.partition(b"\ncreated_at: ")
    created, _, tail = rest.partition(b"\n")
    # updated_at is the create commit's author time (docs/format.md): the same second as
    # created_at, or the next when the clock ticked between the two.
    authored = int(git(store, "log", "-1", "--format=%at").strip())
    updated = dt.datetime.fromtimestamp(authored, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    derived = b"\nupdated_at: " + updated.encode() + b"\nversion: 1\n"
    assert shown.stdout == head + b"\ncreated_at: " + created + derived + tail
    assert shown.stdout.endswith(b"\n\n" + body)

    missing = run("--store", str(store), "show", "mem_missing", cwd=tmp_path)
    assert missing.returncode == 3
    assert missing.stdout == b""
    one_line_error(missing.stderr.decode())

    bad = run("--store", str(store), "add", "-", input=b"\xff\xfe", cwd=tmp_path)
    assert bad.returncode == 4
    assert "UTF-8" in one_line_error(bad.stderr.decode())

    usage = run("--store", str(store), "ls", "--no-such-option", cwd=tmp_path)
    assert usage.returncode == 2
    one_line_error(usage.stderr.decode())


def test_python_dash_m_gitmem(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "gitmem"]
    result = run("--version", cwd=tmp_path, command=command)
    assert result.returncode == 0
    assert result.stdout.decode().startswith("gitmem, version ")
    store = tmp_path / "s"
    assert run("init", "--bare", str(store), cwd=tmp_path, command=command).returncode == 0
    listed = run("--store", str(store), "ls", "--json", cwd=tmp_path, command=command)
    assert json.loads(listed.stdout) == []


def test_store_found_from_a_project_subdirectory(tmp_path: Path, git: GitRunner) -> None:
    project = tmp_path / "project"
    (project / "pkg" / "sub").mkdir(parents=True)
    git(tmp_path, "init", "-q", str(project))
    assert run("init", "--project", cwd=project / "pkg").returncode == 0
    added = run("add", "project memory", cwd=project / "pkg" / "sub")
    assert added.returncode == 0, added.stderr
    memory_id = added.stdout.decode().strip()
    assert (project / ".gitmem" / memory_path(memory_id)).is_file()
    assert git(project, "status", "--porcelain") == ""


def demo_output(result: subprocess.CompletedProcess[bytes]) -> str:
    assert result.returncode == 0, result.stderr.decode()
    assert b"Traceback" not in result.stderr
    return result.stdout.decode()


def commit_count(store: Path, git: GitRunner) -> int:
    return int(git(store, "rev-list", "--count", "main").strip())


def test_demo_runs_twice_on_the_default_store(tmp_path: Path, git: GitRunner) -> None:
    env = {"GITMEM_HOME": str(tmp_path / "demo-store")}
    first = demo_output(run("demo", cwd=tmp_path, env=env))
    for step in ("gitmem add", "gitmem update", "gitmem supersede", "gitmem ls", "gitmem history"):
        assert step in first
    assert "Gitmem-Op: supersede" in first  # git's own log, with the trailers
    assert "Gitmem-Prune: projects/demo/review_history archived [Review 2026-01-01]" in first
    store = tmp_path / "demo-store"
    assert commit_count(store, git) == 1 + 5 + 2  # the layered document: create, append
    second = demo_output(run("demo", cwd=tmp_path, env=env))
    assert "Gitmem-Op: supersede" in second
    assert "archived: Review 2026-01-02" in second  # the next oldest, on the next append
    assert commit_count(store, git) == 1 + 5 + 2 + 5 + 1
    assert git(store, "status", "--porcelain") == ""
    git(store, "fsck", "--strict")
    listed = run("--store", str(store), "ls", "--tag", "demo", "--json", cwd=tmp_path)
    assert len(json.loads(listed.stdout)) == 6  # three per run, the superseded one hidden


def test_demo_without_git_installed(tmp_path: Path, git: GitRunner) -> None:
    empty_bin = tmp_path / "bin"
    empty_bin.mkdir()
    env = {"PATH": str(empty_bin), "GITMEM_HOME": str(tmp_path / "demo-store")}
    output = demo_output(
        run("demo", cwd=tmp_path, env=env, command=[sys.executable, "-m", "gitmem"])
    )
    assert "git is not installed here" in output
    assert "supersede: Release branch naming" in output


def test_demo_with_store_option(tmp_path: Path, git: GitRunner) -> None:
    store = tmp_path / "explicit"
    assert run("init", "--bare", str(store), cwd=tmp_path).returncode == 0
    output = demo_output(run("demo", "--store", str(store), cwd=tmp_path))
    assert f"Store: {store}" in output
    assert commit_count(store, git) == 1 + 5 + 2


def readme_demo_command() -> str:
    """The demo part of the README's first command (after the install steps)."""
    readme = (ROOT / "README.md").read_text()
    for line in readme.splitlines():
        if "gitmem demo" in line:
            return line.split("&&")[-1].strip()
    raise AssertionError("README.md has no gitmem demo command")


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash to run the README's line")
def test_the_readme_demo_command_runs(tmp_path: Path, git: GitRunner) -> None:
    command = readme_demo_command()
    # The README installs into .venv; here gitmem is already installed.
    words = [
        shlex.join(gitmem_command()) if re.search(r"(^|/)gitmem$", word) else word
        for word in shlex.split(command)
    ]
    line = " ".join(words)
    for _ in range(2):  # and again, on a store that already has memories
        result = subprocess.run(
            ["bash", "-c", line], cwd=tmp_path, capture_output=True, check=False, timeout=120
        )
        assert "Gitmem-Op: supersede" in demo_output(result)
    # Each run: 5 memory writes; the layered document is created once and appended each run.
    assert commit_count(tmp_path / "demo-store", git) == 1 + (5 + 2) + (5 + 1)


# -- the end of the process ------------------------------------------------------------------

_EXIT_PROBE = """
import atexit, sys
from pathlib import Path
marker = Path(sys.argv.pop(1))
atexit.register(lambda: marker.write_text("atexit ran"))
from gitmem.cli import main
main()
"""


def test_the_entry_point_runs_exit_handlers_flushes_and_keeps_the_exit_code(
    tmp_path: Path,
) -> None:
    # As the process's entry point, main() ends the process without the interpreter's
    # teardown: what an exit must still do (atexit handlers, flushed output, the status)
    # is checked here for a success, a usage error and a not-found error.
    store = tmp_path / "store"
    made = gitmem.init(store)  # the listing's rows, written in process: the exits are the test
    for n in range(30):
        made.create(f"memory {n} " * 50)
    cases = [
        (["--store", str(store), "ls"], 0),
        (["--store", str(store), "lss"], 2),
        (["--store", str(store), "show", "mem_nothere"], 3),
    ]
    for args, status in cases:
        marker = tmp_path / f"atexit-{status}"
        out = tmp_path / f"out-{status}"
        with out.open("wb") as fh:  # a file, not a pipe: block-buffered stdout
            done = subprocess.run(
                [sys.executable, "-c", _EXIT_PROBE, str(marker), *args],
                cwd=tmp_path, stdout=fh, stderr=subprocess.PIPE, check=False, timeout=120,
            )
        assert done.returncode == status, done.stderr
        assert marker.read_text() == "atexit ran"
        if status == 0:
            listed = out.read_text().splitlines()
            assert len(listed) == 31 and listed[0].startswith("ID")  # all of it, flushed
        else:
            assert done.stderr.decode().startswith("gitmem: ")


@pytest.mark.slow
def test_a_write_then_exit_leaves_an_index_the_next_process_reads(tmp_path: Path) -> None:
    # The index's SQLite connection is not closed at exit (its write-ahead log stays):
    # every later process, reading or writing, sees what each one committed.
    store = tmp_path / "store"
    assert run("init", str(store), cwd=tmp_path).returncode == 0
    ids = []
    for n in range(5):
        added = run("--store", str(store), "add", f"distinct note number {n}", cwd=tmp_path)
        assert added.returncode == 0, added.stderr
        ids.append(added.stdout.decode().strip())
        found = run("--store", str(store), "search", f"{n}", cwd=tmp_path)
        assert ids[-1] in found.stdout.decode()
    listed = run("--store", str(store), "--json", "ls", cwd=tmp_path)
    assert sorted(m["id"] for m in json.loads(listed.stdout)) == sorted(ids)
    checked = run("--store", str(store), "doctor", cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
