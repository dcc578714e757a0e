"""A walk over every command of the CLI: bad bytes, unknown subcommands, a read-only store.

Each must end in one line on stderr with its documented exit code (docs/cli.md): 4 for an
argument that is not UTF-8, 2 for an unknown command, 7 for a write to a store this
process cannot write (and reading commands keep working there, served from git).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest
from clitools import make_runner, one_line_error

import gitmem
from gitmem.cli import cli

BAD = os.fsdecode(b"caf\xe9")


def _command_paths() -> list[tuple[str, ...]]:
    """Every command and subcommand, as the words that name it."""
    found: list[tuple[str, ...]] = []
    ctx = click.Context(cli)

    def walk(group: click.Group, prefix: tuple[str, ...]) -> None:
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            if command is None:
                continue
            path = (*prefix, name)
            found.append(path)
            if isinstance(command, click.Group):
                walk(command, path)

    walk(cli, ())
    return found


PATHS = _command_paths()
GROUPS = [
    path
    for path in PATHS
    if isinstance(cli.get_command(click.Context(cli), path[0]), click.Group) and len(path) == 1
]


def test_the_walk_sees_every_command() -> None:
    names = {path[0] for path in PATHS}
    assert {"add", "show", "ls", "search", "layer", "status", "doctor"} <= names
    assert ("layer", "create") in PATHS


@pytest.mark.parametrize("path", PATHS, ids=[" ".join(p) for p in PATHS])
def test_every_command_refuses_non_utf8_bytes(tmp_path: Path, path: tuple[str, ...]) -> None:
    store = gitmem.init(tmp_path / "s")
    before = store.db().tip()
    result = make_runner().invoke(cli, ["--store", str(store.path), *path, BAD])
    assert result.exit_code == 4, (path, result.stderr)
    line = one_line_error(result.stderr)
    assert "is not UTF-8 text" in line and "caf\\xe9" in line
    assert store.db().tip() == before  # nothing written


@pytest.mark.parametrize("path", GROUPS, ids=[" ".join(p) for p in GROUPS])
def test_every_group_names_an_unknown_subcommand(tmp_path: Path, path: tuple[str, ...]) -> None:
    result = make_runner().invoke(cli, ["--store", str(tmp_path), *path, "no-such-thing"])
    assert result.exit_code == 2, (path, result.stderr)
    assert "No such command 'no-such-thing'" in one_line_error(result.stderr)


# -- a read-only store ------------------------------------------------------------------------

READS = [
    ["ls"], ["ls", "--all"], ["show", "{id}"], ["show", "{prefix}"], ["search", "hello"],
    ["history", "{id}"], ["log"], ["status"], ["stale"], ["validate", "--all"],
    ["blame", "{id}"], ["layer", "list", "project", "api"], ["layer", "staleness"],
    ["layer", "read", "project", "known_issues", "-p", "api"], ["doctor"],
    ["reindex"],  # the reader's own index, in their state directory
]
WRITES = [
    ["add", "more"], ["update", "{id}", "new"], ["append", "{id}", "- more"],
    ["supersede", "{id}", "other"], ["rm", "{id}"], ["restore", "{id}", "--at", "HEAD~2"],
    ["layer", "append", "projects/api/known_issues", "x"], ["gc"],
]

# Runs inside the read-only view: every command in-process, results as JSON on stdout.
_WALKER = """
import json, sys
from click.testing import CliRunner
from gitmem.cli import cli
store, commands = sys.argv[1], json.loads(sys.argv[2])
try:
    runner = CliRunner(mix_stderr=False)
except TypeError:
    runner = CliRunner()
out = []
for argv in commands:
    r = runner.invoke(cli, ["--store", store, *argv])
    out.append([argv, r.exit_code, r.stderr])
print(json.dumps(out))
"""


def _read_only_runs(store: Path, commands: list[list[str]]) -> list[tuple[list[str], int, str]]:
    """Run ``commands`` against ``store`` made read-only: a read-only bind mount when root
    (root ignores file modes), else the files' write bits removed."""
    argv = [sys.executable, "-c", _WALKER, str(store), json.dumps(commands)]
    if os.geteuid() == 0:
        if shutil.which("unshare") is None or shutil.which("mount") is None:
            pytest.skip("root without unshare/mount: cannot make a read-only store")
        script = (
            'mount --bind "$1" "$1" && mount -o remount,ro,bind "$1" && shift && exec "$@"'
        )
        argv = ["unshare", "-m", "sh", "-c", script, "sh", str(store), *argv]
        result = subprocess.run(argv, capture_output=True, text=True)
        if result.returncode != 0 and "mount" in result.stderr:
            pytest.skip(f"no read-only bind mount here: {result.stderr.strip()}")
    else:
        subprocess.run(["chmod", "-R", "a-w", str(store)], check=True)
        try:
            result = subprocess.run(argv, capture_output=True, text=True)
        finally:
            subprocess.run(["chmod", "-R", "u+w", str(store)], check=True)
    assert result.returncode == 0, result.stderr
    return [(a, code, err) for a, code, err in json.loads(result.stdout)]


def test_a_read_only_store(tmp_path: Path) -> None:
    store = gitmem.init(tmp_path / "s")
    memory = store.create("hello there", title="Greeting")
    store.update(memory.id, "hello again")
    from gitmem.features.layered import LayeredStore

    LayeredStore(store).create(
        {"layer": "shared-project", "project": "api", "fileType": "known_issues",
         "content": "# Known issues\n"}
    )
    store.list()  # the index exists and is current before the store turns read-only
    tip = store.db().tip()

    def fill(argv: list[str]) -> list[str]:
        return [a.format(id=memory.id, prefix=memory.id[:9]) for a in argv]

    runs = _read_only_runs(store.path, [fill(a) for a in READS + WRITES])
    for argv, code, stderr in runs[: len(READS)]:
        assert code == 0, (argv, stderr)
        assert "error" not in stderr, (argv, stderr)
    for argv, code, stderr in runs[len(READS) :]:
        assert code == 7, (argv, code, stderr)
        line = one_line_error(stderr)
        assert "read-only for you" in line, (argv, line)
    doctor = runs[READS.index(["doctor"])]
    assert "reindex" not in doctor[2]
    assert store.db().tip() == tip
