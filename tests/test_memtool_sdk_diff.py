"""Differential test: gitmem's memory tool against the anthropic SDK's own
``BetaLocalFilesystemMemoryTool``.

Random command sequences (fixed seeds), valid and invalid, go through the SDK's tool on a
temporary directory and through gitmem's adapter (:func:`anthropic_memory_tool`) on a
temporary store. After every step the two must return the same text (or the same
``ToolError`` message), and hold the same tree: the same directories, the same files with
the same contents. The normalisations, each listed in docs/integrations.md ("Claude's
memory tool", "Differences from the SDK's local-filesystem tool"):

- a directory's size in a listing, only where the SDK's file system gives a directory
  another size than one 4,096-byte block (ext4's: gitmem shows that; tmpfs, btrfs and APFS
  differ);
- where the SDK fails with a raw OS error (``NotADirectoryError`` for a path through a
  file, ``OSError`` for a directory moved into itself, ``ValueError`` for a NUL), gitmem
  must refuse with a ``ToolError``; the texts are not compared;
- a refused rename leaves the SDK's tree with the destination's parent directories it made
  before finding out (gitmem changes nothing): those new, empty directories are removed
  from the SDK's side before the trees are compared.
"""

from __future__ import annotations

import os
import random
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import gitmem
from gitmem import Store
from gitmem.entry.memtool import DIR_SIZE, dir_name
from gitmem.format.layout import KEEP_FILE, MEMORY_SUFFIX
from tests.storetools import tip

_REASON = "the anthropic SDK is not installed (pip install anthropic)"
anthropic_tools = pytest.importorskip("anthropic.lib.tools", reason=_REASON)
anthropic_memory = pytest.importorskip("anthropic.tools.memory", reason=_REASON)

SEEDS = [pytest.param(seed, marks=[pytest.mark.slow] if seed >= 5 else []) for seed in range(20)]
"""Five sequences in the quick run (``-m "not slow"``); the other fifteen are volume."""
STEPS = 60

# No two names differ only in letter case: gitmem refuses case twins (a checkout on a
# case-insensitive file system would make them one file), a documented difference.
FILES = [
    "a.md", "notes.md", "my notes.md", "café.md", "_private.md", "v1.2.final.md", "todo",
    "todo.md", "data.json", ".hidden", "x.md.md", "a..b.md", "日本語.txt", "Z.md", "x--a.md",
    "x--a", "%2e%2e", "back\\slash.md", "d", ".md", "e mojí 🎉.md", "sp ace ",
]  # fmt: skip
DIRS = ["d", "sub dir", "ünï", "_d", "a.b.c", ".hid", "d.md", "x--d", "todo", "q"]
LINES = ["alpha", "beta", "gamma tea", "tea", "ünïcode ✓", "", "  indented", "tab\there", "x"]
MUTATING = {"create", "str_replace", "insert", "delete", "rename"}


class Sdk:
    """The SDK's tool on a directory, and what is in it."""

    def __init__(self, base: Path) -> None:
        self.tool = anthropic_memory.BetaLocalFilesystemMemoryTool(base_path=str(base))
        self.root = base / "memories"

    def tree(self) -> tuple[set[str], dict[str, str]]:
        dirs: set[str] = set()
        files: dict[str, str] = {}
        for here, subdirs, names in os.walk(self.root):
            rel = os.path.relpath(here, self.root)
            prefix = "" if rel == "." else rel + "/"
            dirs.update(prefix + d for d in subdirs)
            for name in names:
                files[prefix + name] = (Path(here) / name).read_text("utf-8")
        return dirs, files

    def remove_new_empty_dirs(self, before: set[str]) -> None:
        """Remove the directories made since ``before`` that hold nothing, deepest first."""
        for made in sorted(self.tree()[0] - before, key=lambda d: d.count("/"), reverse=True):
            if not any((self.root / made).iterdir()):
                (self.root / made).rmdir()


def gitmem_tree(store: Store) -> tuple[set[str], dict[str, str]]:
    """What the model could find in the store: files by the names it gave, and folders."""
    dirs: set[str] = set()
    files: dict[str, str] = {}
    snap = store.db().snapshot()
    for path in snap.iter_files("notes"):
        parts = path.split("/")[1:]
        folders = [dir_name(s) for s in parts[:-1]]
        if parts[-1] == KEEP_FILE:
            pass
        elif path.endswith(MEMORY_SUFFIX):
            memory = store.read(path[: -len(MEMORY_SUFFIX)])
            name = memory.extra.get("memory_file", parts[-1])
            files["/".join([*folders, name])] = memory.body
        else:
            continue
        dirs.update("/".join(folders[: i + 1]) for i in range(len(folders)))
    return dirs, files


def _commits_since(store: Store, old: str | None) -> int:
    """Commits on the branch after ``old`` (first parents: a memory-tool write never merges)."""
    commit, made = store.db().tip(), 0
    while commit is not None and str(commit.id) != old:
        made += 1
        commit = commit.parents[0] if commit.parents else None
    return made


def normalise(text: str) -> str:
    """A listing's directory sizes blanked (the first line after the header, and every line
    ending in '/'); anything else unchanged."""
    if not text.startswith("Here're the files and directories"):
        return text
    lines = text.split("\n")
    out = lines[:1]
    for i, line in enumerate(lines[1:]):
        _, sep, rest = line.partition("\t")
        out.append(f"<dir>{sep}{rest}" if i == 0 or rest.endswith("/") else line)
    return "\n".join(out)


class Generator:
    """Random commands, aimed at what exists about half the time."""

    def __init__(self, seed: int, sdk: Sdk) -> None:
        self.rng = random.Random(seed)
        self.sdk = sdk

    def existing(self) -> tuple[list[str], list[str]]:
        dirs, files = self.sdk.tree()
        return sorted(dirs), sorted(files)

    def new_path(self) -> str:
        rng = self.rng
        depth = rng.choice([0, 0, 1, 1, 2])
        dirs, _ = self.existing()
        if dirs and rng.random() < 0.5:
            base = [rng.choice(dirs)]
        else:
            base = [rng.choice(DIRS) for _ in range(depth)]
        return "/memories/" + "/".join([*base, rng.choice(FILES)])

    def spell(self, path: str) -> str:
        """The same path written differently, now and then, as a model might."""
        roll = self.rng.random()
        if roll < 0.05:
            return path.replace("/memories/", "/memories//", 1)
        if roll < 0.1:
            return path.replace("/memories/", "/memories/./", 1)
        return path

    def some_path(self, want: str = "any") -> str:
        rng = self.rng
        dirs, files = self.existing()
        roll = rng.random()
        if want in {"file", "any"} and files and roll < 0.55:
            return self.spell("/memories/" + rng.choice(files))
        if want in {"dir", "any"} and dirs and roll < 0.8:
            path = "/memories/" + rng.choice(dirs)
            return self.spell(path + ("/" if rng.random() < 0.2 else ""))
        if roll < 0.85:
            return rng.choice(["/memories", "/memories/"])
        if roll < 0.93:
            return self.new_path()
        return rng.choice(
            [
                "/etc/passwd",
                "memories/a.md",
                "/memories/../x.md",
                "/memories/d/../../x.md",
                "/memories/..",
                "/memories/nul\x00.md",
            ]
        )

    def text(self) -> str:
        lines = [self.rng.choice(LINES) for _ in range(self.rng.randint(0, 6))]
        return "\n".join(lines) + ("\n" if self.rng.random() < 0.6 else "")

    def command(self) -> dict[str, Any]:
        rng = self.rng
        [kind] = rng.choices(
            ["view", "create", "str_replace", "insert", "delete", "rename"],
            weights=[2, 3, 1, 1, 1, 2],
        )
        if kind == "view":
            command: dict[str, Any] = {"command": "view", "path": self.some_path()}
            if rng.random() < 0.5:
                command["view_range"] = rng.choice(
                    [[1, 2], [0, -1], [2, -1], [5, 3], [1, 200], [-3, 2], [3], [2, 2], [1, -2]]
                )
            return command
        if kind == "create":
            path = self.new_path() if rng.random() < 0.8 else self.some_path()
            if rng.random() < 0.05:
                path += "/"
            return {"command": "create", "path": path, "file_text": self.text()}
        if kind == "str_replace":
            path = self.some_path("file")
            _, files = self.sdk.tree()
            content = files.get(path.replace("//", "/").replace("/./", "/")[10:], "")
            words = [w for w in content.replace("\n", " ").split(" ") if w] or ["tea"]
            lines = [line for line in content.split("\n") if line] or ["tea"]
            picks = [rng.choice(lines), rng.choice(lines), rng.choice(words)]
            old = rng.choice([*picks, rng.choice(LINES[:5]), "nowhere", "a\nb"])
            old = old or "x"
            return {"command": "str_replace", "path": path, "old_str": old, "new_str": self.text()}
        if kind == "insert":
            return {
                "command": "insert",
                "path": self.some_path("file"),
                "insert_line": rng.randint(-1, 5),
                "insert_text": self.text(),
            }
        if kind == "delete":
            return {"command": "delete", "path": self.some_path()}
        old = self.some_path()
        roll = rng.random()
        if roll < 0.6:
            new = self.new_path()
            if rng.random() < 0.3:
                new = new.rsplit("/", 1)[0] if new.count("/") > 2 else new
        elif roll < 0.8:
            new = self.some_path()
        else:
            new = old.rstrip("/") + "/inner/" + rng.choice(FILES)
        return {"command": "rename", "old_path": old, "new_path": new}


def outcome(call: Callable[[], Any]) -> tuple[str, str]:
    try:
        return "ok", str(call())
    except anthropic_tools.ToolError as exc:
        return "refused", str(exc)
    except (OSError, ValueError) as exc:
        return "raw", type(exc).__name__


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
def test_gitmem_matches_the_sdks_local_filesystem_tool(tmp_path: Path, seed: int) -> None:
    from gitmem.entry.memtool import anthropic_memory_tool

    sdk = Sdk(tmp_path / "sdk")
    # Directory sizes are compared where the file system gives a directory one block.
    blank = normalise if tmp_path.stat().st_size != DIR_SIZE else (lambda text: text)
    store = gitmem.init(tmp_path / "store")
    ours = anthropic_memory_tool(store)
    gen = Generator(seed, sdk)
    for step in range(STEPS):
        command = gen.command()
        where = f"seed {seed} step {step}: {command!r}"
        dirs_before = sdk.tree()[0]
        before = tip(store)
        theirs_kind, theirs = outcome(lambda c=command: sdk.tool.call(dict(c)))
        ours_kind, mine = outcome(lambda c=command: ours.call(dict(c)))
        if theirs_kind == "raw":
            assert ours_kind == "refused", f"{where}: SDK {theirs}, gitmem {mine}"
        else:
            assert (ours_kind, blank(mine)) == (theirs_kind, blank(theirs)), where
        if theirs_kind != "ok" and command["command"] == "rename":
            sdk.remove_new_empty_dirs(dirs_before)
        made = _commits_since(store, before)
        if ours_kind == "ok" and command["command"] in MUTATING:
            assert made == 1, f"{where}: {made} commits"
        else:
            assert made == 0, f"{where}: {made} commits"
        assert gitmem_tree(store) == sdk.tree(), where


def test_the_normalisation_is_narrow() -> None:
    listing = (
        "Here're the files and directories up to 2 levels deep in /memories, excluding hidden "
        "items:\n4.0K\t/memories\n4.0K\t/memories/d/\n12B\t/memories/d/a.md"
    )
    assert normalise(listing).split("\n")[1:] == [
        "<dir>\t/memories",
        "<dir>\t/memories/d/",
        "12B\t/memories/d/a.md",
    ]
    assert normalise("Here's the content of /memories/x/ with line numbers:\n") == (
        "Here's the content of /memories/x/ with line numbers:\n"
    )
    assert shutil.which("git")
