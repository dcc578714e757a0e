"""Docs that run as written: every shell and Python block of README.md, and the blocks of
docs/cli.md marked to run, in a scratch directory with an empty HOME.

A block is run unless an HTML comment on the line before it says otherwise:

- ``<!-- docs-test: skip: why -->``: not run (the test suite itself, a server);
- ``<!-- docs-test: slow: why -->``: run by a test marked slow (installs into a venv);
- ``<!-- docs-test: setup: CMD -->``: CMD runs first (what the reader is assumed to have,
  such as a project repository);
- ``<!-- docs-test: run -->`` (docs/cli.md): run the block's ``$ `` lines, output lines
  being what the reader sees.

README's bash blocks run in order in one shell with ``set -e -o pipefail``, as a reader
pasting them into one terminal would, so a variable set in one block is there in the next;
``gitmem`` is the entry point of the Python running the tests, as after the README's install.
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


def _readme_script(shell: list[Block]) -> str:
    parts = []
    for block in shell:
        setup = block.mark("setup")
        parts.append(f"echo '### {block.name}' >&2")
        if setup:
            parts.append(setup)
        parts.append(block.text)
    return "\n".join(parts) + "\n"


@pytest.mark.slow  # about forty gitmem processes: a minute on a loaded machine
def test_readme_blocks_run_as_written(tmp_path: Path) -> None:
    all_blocks = blocks("README.md")
    shell = [
        b for b in all_blocks
        if b.lang in {"bash", "sh"} and b.mark("skip") is None and b.mark("slow") is None
    ]
    assert len(shell) >= 3  # the tour, plain git, beyond single memories
    work, env = _scratch(tmp_path)
    out = _run(_readme_script(shell), work, env, "README's shell blocks")
    assert "mem_" in out
    for block in all_blocks:
        if block.lang == "python" and block.mark("skip") is None:
            (work / "readme_block.py").write_text(block.text + "\n")
            _run(f"{sys.executable} readme_block.py", work, env, f"the Python block {block.name}")


def test_every_readme_block_is_run_or_says_why() -> None:
    for block in blocks("README.md"):
        if block.lang in {"bash", "sh", "python"}:
            for kind, value in block.marks:
                assert kind in {"skip", "slow", "setup"}, block.name
                assert value, f"{block.name}: a docs-test {kind} mark says why"


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


def test_cli_md_marked_blocks_run(tmp_path: Path) -> None:
    marked = [b for b in blocks("docs/cli.md") if b.mark("run") is not None]
    assert marked, "docs/cli.md marks at least one block to run"
    work, env = _scratch(tmp_path)
    for block in marked:
        commands = [
            line[2:] for line in block.text.splitlines() if line.startswith("$ ")
        ]
        setup = block.mark("setup")
        _run("\n".join([setup or "", *commands]), work, env, f"the block {block.name}")
