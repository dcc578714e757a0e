"""Docs that run: every shell and Python block of README.md and docs/*.md, in a scratch
directory with an empty HOME, each document's blocks in order in one shell.

A block is run unless an HTML comment on the line before it says otherwise:

- ``<!-- docs-test: skip: why -->``: not run (the test suite itself, a server, the network);
- ``<!-- docs-test: slow: why -->``: run by a test of its own, marked slow (an install);
- ``<!-- docs-test: setup: CMD -->``: the shell command CMD runs first (what the reader is
  assumed to have, such as a project repository);
- ``<!-- docs-test: given: CODE -->`` (Python blocks): the Python CODE runs first in the same
  interpreter (the ``store`` the text speaks of).

Shell blocks (``bash``, ``sh``) run in order in one shell with ``set -e -o pipefail``, as a
reader pasting them into one terminal would, so a variable set in one block is there in the
next; Python blocks run as ``python FILE`` from that shell, in their place. A shell block
written as a session (lines starting ``$ ``) runs its ``$ `` lines, the rest being what the
reader sees; a command whose output shown starts with ``gitmem: error:`` must fail. ``gitmem``
is the entry point of the Python running the tests, as after the README's install. Every
fenced block names its language: ``text`` for output, listings and synopses, which do not run.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_FENCE = re.compile(r"^```(\w*)\s*$")
_MARK = re.compile(r"^<!--\s*docs-test:\s*(\w+)\s*:?\s*(.*?)\s*-->\s*$")


@dataclass
class Block:
    doc: str
    line: int
    lang: str
    text: str
    marks: list[tuple[str, str]]

    def mark(self, kind: str) -> str | None:
        for name, value in self.marks:
            if name == kind:
                return value
        return None

    @property
    def name(self) -> str:
        return f"{self.doc}:{self.line}"


def blocks(doc: str) -> list[Block]:
    lines = (ROOT / doc).read_text().splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if fence is None:
            i += 1
            continue
        marks: list[tuple[str, str]] = []
        j = i - 1
        while j >= 0 and (m := _MARK.match(lines[j])):
            marks.insert(0, (m.group(1), m.group(2)))
            j -= 1
        end = i + 1
        while end < len(lines) and not lines[end].startswith("```"):
            end += 1
        found.append(Block(doc, i + 1, fence.group(1), "\n".join(lines[i + 1 : end]), marks))
        i = end + 1
    return found


def _env(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["HOME"] = str(home)
    env.pop("GITMEM_HOME", None)  # the default, ~/.gitmem, as for a new user
    env.pop("GITMEM_DIR", None)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["EDITOR"] = "true"  # `gitmem edit` opens it; a reader would type and save
    env["GIT_CONFIG_GLOBAL"] = str(home / ".gitconfig")
    return env


def _scratch(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / ".gitconfig").write_text(
        "[user]\n\tname = Doc Reader\n\temail = reader@example.com\n"
        "[init]\n\tdefaultBranch = main\n"
    )
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    return work, _env(home)


def _run(script: str, work: Path, env: dict[str, str], what: str) -> str:
    result = subprocess.run(
        ["bash", "-c", "set -e -o pipefail\n" + script],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, (
        f"{what} failed (exit {result.returncode})\n--- stdout\n{result.stdout[-3000:]}"
        f"\n--- stderr\n{result.stderr[-3000:]}"
    )
    return result.stdout


RUNS = {"bash", "sh", "python"}
"""The languages that run; every other fenced block is data (yaml, json, text, ...)."""
DOCS = ["README.md", *sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md"))]


def _session(text: str) -> list[str]:
    """A block written as a session: each ``$ `` command (with the lines a trailing
    backslash continues it onto), as a shell line that must fail when the output shown
    under it starts with ``gitmem: error:``."""
    lines = text.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        if not lines[i].startswith("$ "):
            i += 1
            continue
        command = [lines[i][2:]]
        while command[-1].endswith("\\") and i + 1 < len(lines):
            i += 1
            command.append(lines[i])
        i += 1
        shown = lines[i] if i < len(lines) else ""
        joined = "\n".join(command)
        if shown.startswith("gitmem: error:"):
            out.append(f"if {joined}\nthen echo 'expected to fail: {command[0]}' >&2; exit 1; fi")
        else:
            out.append(joined)
    return out


def _script(doc: str, work: Path) -> str:
    """The document's blocks that run, in order, as one shell script."""
    parts = []
    for n, block in enumerate(blocks(doc)):
        if block.lang not in RUNS or block.mark("skip") is not None or block.mark("slow"):
            continue
        parts.append(f"echo '### {block.name}' >&2")
        setup = block.mark("setup")
        if setup:
            parts.append(setup)
        if block.lang == "python":
            given = block.mark("given")
            source = work / f"block_{n}.py"
            source.write_text((given + "\n" if given else "") + block.text + "\n")
            parts.append(f'"{sys.executable}" {source.name}')
        elif any(line.startswith("$ ") for line in block.text.splitlines()):
            parts.extend(_session(block.text))
        else:
            parts.append(block.text)
    return "\n".join(parts) + "\n"


def test_every_block_runs_or_says_why() -> None:
    for doc in DOCS:
        for block in blocks(doc):
            assert block.lang, f"{block.name}: a fenced block names its language (text: none runs)"
            for kind, value in block.marks:
                assert kind in {"skip", "slow", "setup", "given"}, block.name
                assert value, f"{block.name}: a docs-test {kind} mark says why"
            if block.mark("given") is not None:
                assert block.lang == "python", block.name


@pytest.mark.slow  # dozens of gitmem processes per document: minutes on a loaded machine
@pytest.mark.parametrize("doc", DOCS)
def test_the_blocks_run_as_written(doc: str, tmp_path: Path) -> None:
    work, env = _scratch(tmp_path)
    script = _script(doc, work)
    if "### " not in script:
        pytest.skip(f"{doc} has no block that runs")
    out = _run(script, work, env, f"{doc}'s blocks")
    if doc == "README.md":
        # One story in one store: the reader's, not a user store made behind their back.
        assert "mem_" in out
        assert not (Path(env["HOME"]) / ".gitmem").exists()


@pytest.mark.slow
def test_readme_first_command_installs_and_runs_the_demo(tmp_path: Path) -> None:
    """The README's first command, verbatim, in a copy of this checkout."""
    first = next(b for b in blocks("README.md") if b.lang == "bash")
    assert first.mark("slow") is not None
    copy = tmp_path / "checkout"
    files = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files"], capture_output=True, text=True, check=True
    ).stdout.split()
    for name in files:
        if (ROOT / name).is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, copy / name)
    _, env = _scratch(tmp_path)
    out = _run(first.text, copy, env, "README's first command")
    assert "Next: look around with" in out
    # the demo's hints name the program that ran it, so they work as printed
    hint = next(line for line in out.splitlines() if " ls --all" in line).strip()
    _run(hint, copy, env, "the demo's first hint")
