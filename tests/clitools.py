"""Helpers for the command-line tests: a CliRunner that keeps stderr apart, a scripted editor."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from gitmem.cli import cli


def make_runner() -> CliRunner:
    try:  # click < 8.2 mixes stderr into output unless told not to
        return CliRunner(mix_stderr=False)  # type: ignore[call-arg]
    except TypeError:
        return CliRunner()


@dataclass
class Gitmem:
    """Runs ``gitmem --store STORE ...`` in-process and checks the exit code."""

    store: Path | None
    runner: CliRunner

    def __call__(
        self,
        *args: str,
        input: str | bytes | None = None,
        code: int = 0,
        env: dict[str, str | None] | None = None,
    ) -> Result:
        argv: list[str] = ["--store", str(self.store)] if self.store is not None else []
        result = self.runner.invoke(cli, [*argv, *args], input=input, env=env)
        assert result.exit_code == code, (
            f"gitmem {' '.join(args)} exited {result.exit_code}, wanted {code}\n"
            f"stdout: {result.stdout}\nstderr: {result.stderr}\nexception: {result.exception!r}"
        )
        return result

    def json(self, *args: str, input: str | bytes | None = None) -> Any:
        return json.loads(self(*args, "--json", input=input).stdout)

    def fails(self, code: int, *args: str, input: str | bytes | None = None) -> str:
        """Run a command that must fail with ``code``; return its one-line error."""
        result = self(*args, input=input, code=code)
        assert result.stdout == ""
        return one_line_error(result.stderr)


def pretend_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the runner's streams say they are a terminal, as in an interactive shell: what
    gitmem shows only there (progress bars, git's own progress) is then drawn on stderr."""
    import click.testing

    monkeypatch.setattr(click.testing._NamedTextIOWrapper, "isatty", lambda self: True)


def one_line_error(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1, f"want one line on stderr, got: {stderr!r}"
    assert lines[0].startswith("gitmem: error: "), lines[0]
    assert "Traceback" not in stderr
    return lines[0]


EDITOR_SCRIPT = """\
import sys
from pathlib import Path

target = Path(sys.argv[-1])
here = Path(__file__).parent
text = target.read_bytes().decode("utf-8")
(here / "seen.md").write_bytes(text.encode("utf-8"))
code = (here / "edit.py").read_text()
namespace = {"text": text, "Path": Path}
exec(code, namespace)
if namespace.get("fail"):
    sys.exit(1)
data = namespace["text"]
target.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
"""


class Editor:
    """A scripted $EDITOR: each edit runs Python code that rewrites ``text``.

    ``seen`` is the text the editor was last given, so tests can check that a
    kept edit is what the next ``gitmem edit`` opens.
    """

    def __init__(self, directory: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        script = directory / "editor.py"
        script.write_text(EDITOR_SCRIPT)
        monkeypatch.setenv("EDITOR", f"{sys.executable} {script}")
        self.will("pass")

    def will(self, code: str) -> None:
        (self.directory / "edit.py").write_text(code)

    @property
    def seen(self) -> str:
        return (self.directory / "seen.md").read_text()


def run_step(script: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """A CI recipe's shell step as the host runs it: bash -e, with this gitmem first on PATH
    and the host's variables set to local values."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    return subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", script],
        cwd=cwd,
        env={**os.environ, "PATH": path, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )
