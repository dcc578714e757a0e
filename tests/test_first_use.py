"""First use, one rule however a store is named (docs/cli.md, "First use"): a command that
writes makes the store it is pointed at; a command that only reads says there is none."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from clitools import Gitmem, make_runner

import gitmem

# How a reader can point gitmem at NEW: (arguments before the command, after it, environment).
WAYS: dict[str, tuple[list[str], list[str], dict[str, str]]] = {
    "--store first": (["--store", "NEW"], [], {}),
    "--store after": ([], ["--store", "NEW"], {}),
    "GITMEM_DIR": ([], [], {"GITMEM_DIR": "NEW"}),
    "GITMEM_HOME": ([], [], {"GITMEM_HOME": "NEW"}),
}


def _run(way: str, command: list[str], code: int) -> str:
    before, after, env = WAYS[way]
    result = Gitmem(None, make_runner())(*before, *command, *after, env=dict(env), code=code)
    return str(result.stderr)


@pytest.mark.parametrize("way", WAYS)
def test_a_write_makes_the_store_it_is_pointed_at(
    way: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    err = _run(way, ["add", "first words", "--title", "First"], 0)
    assert f"gitmem: created a new store at {tmp_path / 'NEW'}" in err
    assert [m.title for m in gitmem.open(tmp_path / "NEW").list()] == ["First"]
    assert not (Path(os.environ["HOME"]) / ".gitmem").exists()  # no second store
    assert "created" not in _run(way, ["add", "second"], 0)  # made once


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize(
    "command", [["ls"], ["show", "mem_1"], ["search", "x"], ["status"], ["rm", "mem_1"]]
)
def test_a_read_says_there_is_no_store(
    way: str, command: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    err = _run(way, command, 7)
    assert err.startswith("gitmem: error: no store at ") and "gitmem init" in err
    assert not (tmp_path / "NEW").exists()
    assert not (Path(os.environ["HOME"]) / ".gitmem").exists()


def test_the_default_user_store_follows_the_same_rule(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    home = Path(os.environ["GITMEM_HOME"])
    runner = Gitmem(None, make_runner())
    assert f"no store at {home}" in runner.fails(7, "ls")
    assert not home.exists()
    assert f"created a new store at {home}" in runner("add", "a fact").stderr
    assert "created" not in runner("ls").stderr


@pytest.mark.parametrize("way", ["--store after", "--store first", "GITMEM_DIR"])
def test_demo_runs_on_a_store_it_names(
    way: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _run(way, ["demo"], 0)
    assert len(gitmem.open(tmp_path / "NEW").list(tags=["demo"])) == 3


def test_an_empty_folder_is_made_a_store_and_a_full_one_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "NEW").mkdir()
    _run("--store first", ["add", "x"], 0)
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "notes.txt").write_text("mine\n")
    line = Gitmem(taken, make_runner()).fails(7, "add", "x")
    assert "no store at" not in line
    assert sorted(p.name for p in taken.iterdir()) == ["notes.txt"]
