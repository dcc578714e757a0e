"""Another user's store, run as another user for real (git and libgit2 refuse a repository
the user running them does not own).

A store the user names (``--store``) and may read answers every read command, leaves the
store as it was (its index is built in the reader's own state directory) and refuses a
write in one line; a store found by walking up is refused until the user trusts it, and
``gitmem trust`` then does what it says. The commands run under ``setpriv`` with a user id
no account has, as root; elsewhere the tests are skipped, saying why.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import site
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import gitmem
from gitmem.store.mergedriver import register_driver

REPO = Path(gitmem.__file__).resolve().parent.parent
Run = Callable[..., subprocess.CompletedProcess[str]]


def _free_uid() -> int:
    for uid in range(52_000, 53_000):
        try:
            pwd.getpwuid(uid)
        except KeyError:
            return uid
    pytest.skip("no free user id in 52000-52999 to run gitmem as another user")


def _interpreters() -> list[str]:
    """Pythons the other user may be able to run: this one (often under a home the other
    user cannot enter), then the system's of the same version."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    found = [sys.executable, os.path.realpath(sys.executable), f"/usr/bin/python{version}"]
    found += [p for p in (shutil.which(f"python{version}"),) if p]
    return list(dict.fromkeys(found))


def _shared(parent: Path | None, prefix: str) -> Path:
    """A new folder every user can enter (pytest's own are its owner's alone)."""
    made = Path(tempfile.mkdtemp(dir=parent, prefix=prefix))
    made.chmod(0o755)
    return made


@pytest.fixture(scope="module")
def workspace() -> Iterator[Path]:
    top = _shared(None, "gitmem-other-user-")
    yield top
    shutil.rmtree(top, ignore_errors=True)


@pytest.fixture
def as_other(workspace: Path, tmp_path: Path) -> tuple[Run, Path, str]:
    """(run gitmem as another user, their home, the Python they run)."""
    if os.geteuid() != 0:
        pytest.skip("running a command as another user needs root")
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("setpriv (util-linux) is not installed")
    uid = _free_uid()
    home = _shared(workspace, "home-")
    os.chown(home, uid, uid)
    env = {
        "HOME": str(home),
        "GITMEM_HOME": str(home / ".gitmem"),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": os.pathsep.join([str(REPO), *site.getsitepackages()]),
        "PYTHONDONTWRITEBYTECODE": "1",
        "LC_ALL": "C.UTF-8",
    }
    user = [setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]

    def run(python: str, *args: str, cwd: Path = home) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*user, python, *args], cwd=cwd, env=env, capture_output=True, text=True,
            timeout=300, check=False,
        )

    for python in _interpreters():
        # The path itself must resolve for them too: git runs the merge driver by it.
        probe = run(python, "-c", f"import gitmem.cli, os; assert os.path.exists({python!r})")
        if probe.returncode == 0:
            break
    else:
        pytest.skip(f"no Python another user may run imports gitmem here ({probe.stderr[-200:]})")

    def gitmem_as_other(*args: str, cwd: Path = home) -> subprocess.CompletedProcess[str]:
        return run(python, "-m", "gitmem", *args, cwd=cwd)

    return gitmem_as_other, home, python


def _files(path: Path) -> dict[str, tuple[int, int, int]]:
    return {
        str(p.relative_to(path)): (p.stat().st_uid, p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(path.rglob("*"))
    }


@pytest.mark.slow
def test_every_read_command_works_on_a_store_another_user_owns(
    as_other: tuple[Run, Path, str], workspace: Path
) -> None:
    run, home, python = as_other
    path = _shared(workspace, "store-") / "store"
    store = gitmem.init(path)
    first = store.create("Deploy with the blue-green script.\n", title="deploy")
    second = store.create("Use pytest fixtures for the database.\n", title="tests")
    store.update(second.id, "Use pytest fixtures for the database and the cache.\n")
    register_driver(path, python)  # the driver the reader would run: doctor checks it
    before = _files(path)

    for args in (
        ["ls"],
        ["show", first.id[:12]],
        ["search", "deploy"],
        ["recall", "how", "do", "we", "deploy?"],
        ["status"],
        ["doctor"],
        ["history", second.id],
        ["log"],
        ["blame", first.id],
        ["diff", "HEAD~1"],
        ["graph"],
        ["stale"],
        ["conflicts"],
        ["secrets"],
        ["review", "HEAD~2..HEAD"],
    ):
        done = run("--store", str(path), *args)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        assert "owned" not in done.stderr and "error" not in done.stderr, (args, done.stderr)
    found = json.loads(run("--store", str(path), "recall", "deploy", "--json").stdout)
    assert [h["id"] for h in found["hits"]][:1] == [first.id]

    # The store is as it was; the reader's index is in their own state directory.
    assert _files(path) == before
    assert list((home / ".local" / "state" / "gitmem" / "stores").glob("*/index.sqlite"))
    # A write is refused in one line, saying how to get write access.
    refused = run("--store", str(path), "add", "a note")
    assert refused.returncode == 7, refused.stderr
    assert refused.stderr.count("\n") == 1 and "belongs to another user" in refused.stderr
    assert "gitmem trust" in refused.stderr
    assert _files(path) == before


def test_trust_lets_a_store_found_by_walking_up_be_used(
    as_other: tuple[Run, Path, str], workspace: Path
) -> None:
    """Found by walking up (not named), another user's store is refused, as git refuses
    such a repository; ``gitmem trust`` is git's ``safe.directory`` for it."""
    run, _home, _python = as_other
    project = _shared(workspace, "project-")
    store = gitmem.init(project / ".gitmem")
    memory = store.create("The project builds with make.\n", title="build")

    refused = run("ls", cwd=project)
    assert refused.returncode == 7, refused.stderr
    assert "belongs to another user" in refused.stderr and "gitmem trust" in refused.stderr
    trusted = run("trust", str(project / ".gitmem"), cwd=project)
    assert trusted.returncode == 0 and trusted.stdout.startswith("trusted: "), trusted.stderr
    listed = run("ls", cwd=project)
    assert listed.returncode == 0 and memory.id in listed.stdout, listed.stderr
    status = run("status", cwd=project)
    assert status.returncode == 0, status.stderr
