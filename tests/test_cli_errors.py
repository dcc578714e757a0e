"""A walk through the error paths of the command line.

Every failure a user can cause ends in one line on stderr, ``gitmem: error:
<what was wrong> (hint: <what to do>)`` where there is something to do, with
the documented exit code (``gitmem --help``, docs/cli.md: 1 unexpected, 2 usage,
3 not found, 4 invalid input, 5 already exists, 6 conflict, 7 store), and no
traceback unless ``--debug`` is given. Usage errors (click's) are
one line too, with a hint naming the help to read, exit 2.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from clitools import make_runner
from storetools import plant

import gitmem
from gitmem import Store
from gitmem.base.errors import EXIT_CODES
from gitmem.cli import LAZY_COMMANDS
from gitmem.cli import cli as gitmem_cli
from gitmem.format.layout import memory_path

FAKE_TOKEN = "glpat-" + "xY9z_8Wv7Ut6Sr5Qp4On"
MISSING = "mem_0f000000-0000-4000-8000-0000000000f0"
BROKEN = "mem_0e000000-0000-4000-8000-0000000000e0"

Case = tuple[list[str], int, str, bytes | None]
"""argv after ``--store STORE``, expected exit code, a phrase the error line names, stdin."""


def _cases(existing: str) -> dict[str, Case]:
    return {
        # not found (3)
        "show-missing": (["show", MISSING], 3, MISSING, None),
        "update-missing": (["update", MISSING, "x"], 3, MISSING, None),
        "append-missing": (["append", MISSING, "x"], 3, MISSING, None),
        "supersede-missing": (["supersede", MISSING, "x"], 3, MISSING, None),
        "rm-missing": (["rm", MISSING], 3, MISSING, None),
        "restore-never-existed": (["restore", MISSING], 3, MISSING, None),
        "history-missing": (["history", MISSING], 3, MISSING, None),
        "show-at-unknown-revision": (["show", existing, "--at", "deadbeef"], 3, "deadbeef", None),
        "edit-missing": (["edit", MISSING], 3, MISSING, None),
        # invalid input (4)
        "show-traversal-id": (["show", "../../etc/passwd"], 4, "etc", None),
        "add-bad-id": (["add", "x", "--id", "a/../b"], 4, "..", None),
        "add-bad-status": (["add", "x", "--status", "gone"], 4, "status", None),
        "add-bad-trigger": (["add", "x", "--trigger", "whenever"], 4, "trigger", None),
        "add-bad-related": (["add", "x", "--related", f"{MISSING}:likes"], 4, "likes", None),
        "add-nul-body": (["add", "-"], 4, "NUL", b"a\x00b"),
        "add-latin1-body": (["add", "-"], 4, "UTF-8", b"caf\xe9"),
        "add-credential": (["add", f"deploy token {FAKE_TOKEN}"], 4, "gitlab-token", None),
        "add-control-title": (["add", "x", "--title", "a\x1bb"], 4, "title", None),
        "update-stale-version": (
            ["append", existing, "x", "--expected-version", "99"],
            6,
            "version",
            None,
        ),
        "show-broken-file": (["show", BROKEN], 4, BROKEN, None),
        "log-bad-date": (["log", "--since", "yesterday-ish"], 4, "yesterday-ish", None),
        "search-bad-regex": (["search", "--regex", "(unclosed"], 4, "does not compile", None),
        "wrong-scope": (["ls", "--scope", "team"], 4, "team", None),
        # already exists (5)
        "add-taken-id": (["add", "again", "--id", existing], 5, existing, None),
        # store (7)
        "secrets-missing-path": (["secrets", "/nonexistent/file"], 7, "no such file", None),
        "secrets-empty-path": (["secrets", ""], 7, "empty PATH", None),
    }


@pytest.fixture
def seeded(store: Store) -> tuple[Store, str]:
    memory = store.create("a memory", title="seed")
    plant(store, memory_path(BROKEN), "no front-matter\n")
    return store, memory.id


def _invoke(
    store: Path, argv: list[str], stdin: bytes | None = None, debug: bool = False
) -> object:
    runner = make_runner()
    prefix = ["--debug"] if debug else []
    return runner.invoke(gitmem_cli, [*prefix, "--store", str(store), *argv], input=stdin)


def assert_one_line(stderr: str, phrase: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1, f"want one line, got {stderr!r}"
    line = lines[0]
    assert line.startswith("gitmem: error: "), line
    assert "Traceback" not in stderr
    assert phrase.lower() in line.lower(), (phrase, line)
    return line


@pytest.mark.parametrize("name", list(_cases("ID")))
def test_error_path(seeded: tuple[Store, str], name: str) -> None:
    store, existing = seeded
    argv, code, phrase, stdin = _cases(existing)[name]
    before = store.db().tip()
    result = _invoke(store.path, argv, stdin)
    assert result.exit_code == code, (argv, result.exit_code, result.stderr)  # type: ignore[attr-defined]
    assert result.stdout == ""  # type: ignore[attr-defined]
    assert_one_line(result.stderr, phrase)  # type: ignore[attr-defined]
    assert store.db().tip() == before  # a failure changes nothing


def test_every_code_is_documented_and_walked(seeded: tuple[Store, str]) -> None:
    walked = {case[1] for case in _cases(seeded[1]).values()}
    # 8 is not an error (the review is printed, then the code): test_review.py walks it.
    # 9 needs an extra missing: test_json_shapes.py walks it.
    elsewhere = {EXIT_CODES["usage"], EXIT_CODES["error"], EXIT_CODES["review-problems"]}
    elsewhere.add(EXIT_CODES["missing-dependency"])
    assert walked | elsewhere == set(EXIT_CODES.values())
    help_text = _invoke(seeded[0].path, ["--help"]).stdout  # type: ignore[attr-defined]
    assert "3 not found, 4 invalid input, 5 already exists, 6 conflict, 7 store" in " ".join(
        help_text.split()
    )


def test_the_store_itself_missing_or_not_a_store(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    subprocess.run(["git", "init", "-q", str(tmp_path / "plain")], check=True)
    for store, phrase in (
        (tmp_path / "nowhere", "no store at"),
        (tmp_path / "plain", "not a gitmem store"),
    ):
        result = _invoke(store, ["ls"])
        assert result.exit_code == 7  # type: ignore[attr-defined]
        line = assert_one_line(result.stderr, phrase)  # type: ignore[attr-defined]
        assert "(hint: " in line


@pytest.mark.parametrize(
    "argv",
    [
        ["frobnicate"],
        ["show"],
        ["add", "x", "--no-such-option"],
        ["doctor", "--check", "nope"],
        ["search"],
        ["log", "--limit", "many"],
    ],
    ids=[
        "unknown-command",
        "missing-argument",
        "unknown-option",
        "bad-choice",
        "no-query",
        "not-a-number",
    ],
)
def test_usage_errors_exit_2_without_traceback(seeded: tuple[Store, str], argv: list[str]) -> None:
    result = _invoke(seeded[0].path, argv)
    assert result.exit_code == 2, result.stderr  # type: ignore[attr-defined]
    line = assert_one_line(result.stderr, "")  # type: ignore[attr-defined]
    assert "(hint: see 'gitmem" in line


def test_debug_shows_the_traceback(seeded: tuple[Store, str]) -> None:
    quiet = _invoke(seeded[0].path, ["show", MISSING])
    loud = _invoke(seeded[0].path, ["show", MISSING], debug=True)
    assert quiet.exit_code == loud.exit_code == 3  # type: ignore[attr-defined]
    assert "Traceback" in loud.stderr  # type: ignore[attr-defined]
    assert loud.stderr.splitlines()[-1] == quiet.stderr.strip()  # type: ignore[attr-defined]


def test_every_command_fails_cleanly_without_a_store(tmp_path: Path) -> None:
    """Each command, pointed at a store that is not there: one line, a documented code
    (or success: ``add`` makes the store it is pointed at)."""
    skip = {"init", "hook-run", "merge-driver", "demo", "mcp", "secrets", "hooks", "remote"}
    for name in LAZY_COMMANDS:
        if name in skip:
            continue
        where = tmp_path / f"nowhere-{name}"
        result = _invoke(where, [name, MISSING] if name != "ls" else [name])
        code = result.exit_code  # type: ignore[attr-defined]
        assert code in set(EXIT_CODES.values()) or name == "add", (name, code)
        err = result.stderr  # type: ignore[attr-defined]
        assert "Traceback" not in err, (name, err)
        if code not in (0, 2):
            assert len(err.splitlines()) == 1 and err.startswith("gitmem: error: "), (name, err)


def test_a_real_process_prints_one_line_and_the_exit_code(seeded: tuple[Store, str]) -> None:
    run: Callable[..., subprocess.CompletedProcess[str]] = subprocess.run
    result = run(
        [sys.executable, "-m", "gitmem", "--store", str(seeded[0].path), "show", MISSING],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 3
    assert result.stdout == ""
    assert_one_line(result.stderr, MISSING)


def test_open_of_a_damaged_config_is_one_line(tmp_path: Path) -> None:
    store = gitmem.init(tmp_path / "s")
    plant(store, "gitmem.yaml", "scope: [not, a, scope]\n")
    result = _invoke(store.path, ["ls"])
    assert result.exit_code == 4  # type: ignore[attr-defined]
    assert_one_line(result.stderr, "gitmem.yaml")  # type: ignore[attr-defined]


def test_allow_secrets_is_the_explicit_allow_on_the_command_line(tmp_path: Path) -> None:
    store = gitmem.init(tmp_path / "s")
    runner = make_runner()
    refused = runner.invoke(gitmem_cli, ["--store", str(store.path), "add", f"token {FAKE_TOKEN}"])
    assert refused.exit_code == 4 and "--allow-secrets" in refused.stderr
    assert store.list() == []
    allowed = runner.invoke(
        gitmem_cli, ["--store", str(store.path), "--allow-secrets", "add", f"token {FAKE_TOKEN}"]
    )
    assert allowed.exit_code == 0, allowed.stderr
    assert FAKE_TOKEN in store.read(allowed.stdout.strip()).body
