"""``gitmem check`` carried over from one project commit to the next: always the answer of a
full check.

Random sequences of project commits (edits, renames, deletes, re-adds, a file becoming a
folder, rename targets appearing later, merges, empty commits, commits dated before their
parent, resets, side branches) with store writes between hook runs, against the real git
binary; after every step the incremental answer is compared with a full check by the index
and by the scan.
"""

from __future__ import annotations

import datetime as dt
import os
import random
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gitmem import FixedClock, Store
from gitmem.features.lifecycle import anchors, check_project

T0 = dt.datetime(2026, 10, 1, 12, tzinfo=dt.UTC)
PATHS = (
    "a.py",
    "src/b.py",
    "src/c.py",
    "src/d/e.py",
    "docs/f.md",
    "lib/g.py",
    "lib/h.py",
    "lib/i.py",
)
NAMED = (*PATHS, "src", "src/d", "lib/", "docs", "nope/x.py", "src/b.py/z.py", "src/c_v2.py")


def _text(seed: int, extra: int = 0) -> str:
    # Long and distinct per seed, so git's rename detection pairs copies and not neighbours.
    lines = [f"line {i} of file {seed}: {'x' * (seed % 7)}\n" for i in range(30)]
    return "".join(lines) + "".join(f"edit {k}\n" for k in range(extra))


class Project:
    def __init__(self, path: Path, rng: random.Random) -> None:
        self.path = path
        self.rng = rng
        self.when = T0
        self.gone: dict[str, str] = {}  # deleted path -> its last text
        self.edits = 0
        path.mkdir()
        self.git("init", "-q", "-b", "main")
        for i, name in enumerate(PATHS):
            self.write(name, _text(i))
        self.commit("first")

    def git(self, *args: str, when: dt.datetime | None = None) -> str:
        stamp = (when or self.when).strftime("%Y-%m-%dT%H:%M:%SZ")
        env = {
            **os.environ,
            "GIT_AUTHOR_DATE": stamp,
            "GIT_COMMITTER_DATE": stamp,
            "GIT_AUTHOR_NAME": "dev",
            "GIT_AUTHOR_EMAIL": "dev@example.invalid",
            "GIT_COMMITTER_NAME": "dev",
            "GIT_COMMITTER_EMAIL": "dev@example.invalid",
            "LC_ALL": "C",
        }
        result = subprocess.run(
            ["git", "-C", str(self.path), *args],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
        return result.stdout

    def write(self, name: str, text: str) -> None:
        full = self.path / name
        full.parent.mkdir(parents=True, exist_ok=True)
        full.write_text(text)

    def files(self) -> list[str]:
        return sorted(self.git("ls-files").split())

    def commit(self, message: str, *, back: bool = False) -> None:
        # Usually an hour after the last commit; sometimes the same second, or (back) an
        # hour before its parent, as a wrong clock would.
        step = self.rng.choice((0, 1, 1, 1, 3)) if not back else -1
        self.when += dt.timedelta(hours=step)
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", message)

    # -- the random steps --------------------------------------------------------------

    def edit(self) -> None:
        name = self.rng.choice(self.files())
        self.edits += 1
        self.write(name, (self.path / name).read_text() + f"edit {self.edits}\n")
        self.commit("edit")

    def rename(self) -> None:
        old = self.rng.choice(self.files())
        new = old.replace(".", "_v2.", 1) if "_v2" not in old else old.replace("_v2", "")
        try:
            if (self.path / new).exists():
                raise FileExistsError(new)
            (self.path / new).parent.mkdir(parents=True, exist_ok=True)
        except OSError:  # the new name's folder would be an existing file
            return self.edit()
        self.git("mv", old, new)
        if self.rng.random() < 0.5:
            self.write(new, (self.path / new).read_text() + "renamed\n")
        self.commit("rename")
        return None

    def delete(self) -> None:
        name = self.rng.choice(self.files())
        self.gone[name] = (self.path / name).read_text()
        self.git("rm", "-q", name)
        self.commit("delete")

    def readd(self) -> None:
        """A deleted path back, or a deleted file's text under a new name (a rename target
        appearing commits after the delete)."""
        if not self.gone:
            return self.edit()
        name = self.rng.choice(sorted(self.gone))
        text = self.gone.pop(name)
        target = name if self.rng.random() < 0.5 else name.replace(".", "_moved.", 1)
        if (self.path / target).exists():
            return self.edit()
        self.write(target, text)
        self.commit("re-add")
        return None

    def to_folder(self) -> None:
        files = [f for f in self.files() if "/" in f]
        if not files:
            return self.edit()
        name = self.rng.choice(files)
        text = (self.path / name).read_text()
        self.git("rm", "-q", name)
        self.write(f"{name}/z.py", text)
        self.commit("file to folder")
        return None

    def merge(self) -> None:
        self.git("checkout", "-q", "-b", "side")
        self.edit()
        self.git("checkout", "-q", "main")
        self.edit()
        self.when += dt.timedelta(hours=1)
        self.git("merge", "-q", "--no-ff", "-m", "merge side", "side")
        self.git("branch", "-q", "-D", "side")

    def reset(self) -> None:
        count = len(self.git("rev-list", "--first-parent", "HEAD").split())
        if count > 2:
            self.git("reset", "-q", "--hard", f"HEAD~{self.rng.randint(1, min(3, count - 1))}")


def _memories(
    store: Store, clock: FixedClock, rng: random.Random, project: Project, n: int
) -> None:
    for _ in range(n):
        named = rng.sample(NAMED, rng.randint(1, 3))
        anchored = [p for p in named if rng.random() < 0.5]
        body = " ".join(f"see `{p}`" for p in named if p not in anchored) or "plain"
        hours = rng.randint(-5, int((project.when - T0).total_seconds() // 3600) + 2)
        clock.current = T0 + dt.timedelta(hours=hours, seconds=rng.choice((0, 0, 1, 1800)))
        extra = {"anchors": anchored} if anchored else None
        store.create(body, title=f"m{rng.random():.6f}", extra=extra)


def _store_write(store: Store, clock: FixedClock, rng: random.Random, project: Project) -> None:
    ids = [m.id for m in store.list()]
    clock.current = project.when + dt.timedelta(seconds=rng.choice((0, 30, 7200)))
    if ids and rng.random() < 0.5:
        target = rng.choice(ids)
        store.update(target, f"now about `{rng.choice(NAMED)}`")
    else:
        _memories(store, clock, rng, project, 1)


def _full(store: Store, project: Path) -> dict[str, Any]:
    return check_project(store, project, incremental=False).to_dict()


def _hook(store: Store, project: Path, spied: list[int]) -> bool:
    """One check as a hook runs it, compared with a full one; whether it was carried over."""
    before = len(spied)
    served = check_project(store, project).to_dict()
    carried = len(spied) == before
    assert served == _full(store, project)
    return carried


@pytest.fixture
def spied(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times the check read every memory (a full run), counted around the real
    function."""
    calls: list[int] = []
    real = anchors._candidates

    def counting(store: Store) -> list[Any]:
        calls.append(1)
        return real(store)

    monkeypatch.setattr(anchors, "_candidates", counting)
    return calls


@pytest.mark.parametrize("seed", range(6))
def test_incremental_equals_full_over_random_histories(
    store: Store, clock: FixedClock, tmp_path: Path, seed: int, spied: list[int]
) -> None:
    rng = random.Random(seed)
    project = Project(tmp_path / "project", rng)
    for _ in range(6):
        project.edit()
    _memories(store, clock, rng, project, 14)
    steps: list[tuple[float, Callable[[], None]]] = [
        (5, project.edit),
        (2, project.rename),
        (2, project.delete),
        (2, project.readd),
        (1, project.to_folder),
        (1, project.merge),
        (1, lambda: project.commit("empty")),
        (0.5, lambda: project.commit("dated before its parent", back=True)),
        (0.7, project.reset),
        (1.5, lambda: _store_write(store, clock, rng, project)),
    ]
    weights = [w for w, _ in steps]
    carried = 0
    for step in range(30):
        rng.choices(steps, weights)[0][1]()
        try:
            carried += _hook(store, project.path, spied)
        except AssertionError as exc:
            raise AssertionError(f"seed {seed}, step {step}") from exc
        if step % 10 == 9:
            served = check_project(store, project.path).to_dict()
            store.use_index = False
            assert check_project(store, project.path).to_dict() == served
            store.use_index = True
    assert served["memories"], "the histories should leave something to report"
    assert carried >= 10, "most steps should be carried over, not checked in full"


def _setup(store: Store, clock: FixedClock, tmp_path: Path) -> Project:
    project = Project(tmp_path / "project", random.Random(7))
    for _ in range(3):
        project.edit()
    _memories(store, clock, random.Random(8), project, 10)
    return project


def test_one_commit_is_carried_over_and_other_moves_are_not(
    store: Store, clock: FixedClock, tmp_path: Path, spied: list[int]
) -> None:
    project = _setup(store, clock, tmp_path)
    assert not _hook(store, project.path, spied)  # nothing saved yet
    assert _hook(store, project.path, spied)  # the same HEAD
    project.edit()
    assert _hook(store, project.path, spied)
    project.commit("dated before its parent", back=True)
    assert _hook(store, project.path, spied)
    project.commit("empty")
    assert _hook(store, project.path, spied)
    # Two commits at once (a pull, a rebase): checked in full.
    project.edit()
    project.edit()
    assert not _hook(store, project.path, spied)
    # A store write: checked in full.
    _store_write(store, clock, random.Random(1), project)
    project.edit()
    assert not _hook(store, project.path, spied)
    # A reset: checked in full.
    project.reset()
    assert not _hook(store, project.path, spied)
    # Config that steers rename detection is part of what a saved run is valid for.
    project.git("config", "diff.renames", "copies")
    assert not _hook(store, project.path, spied)
    project.delete()
    assert _hook(store, project.path, spied)
    # The scan (no index) always reads everything.
    store.use_index = False
    project.edit()
    assert not _hook(store, project.path, spied)


def test_saved_run_that_is_damaged_or_missing_means_a_full_check(
    store: Store, clock: FixedClock, tmp_path: Path, spied: list[int]
) -> None:
    project = _setup(store, clock, tmp_path)
    assert not _hook(store, project.path, spied)
    cache = store.db().state_dir / "lifecycle-named.sqlite"
    with sqlite3.connect(cache) as db:
        db.execute("UPDATE runs SET outcomes = 'not json'")
    db.close()
    project.edit()
    assert not _hook(store, project.path, spied)
    cache.unlink()
    project.edit()
    assert not _hook(store, project.path, spied)
    project.edit()
    assert _hook(store, project.path, spied)
    # incremental=False neither reads nor writes the saved run.
    project.edit()
    _full(store, project.path)
    project.edit()
    assert not _hook(store, project.path, spied)


def test_a_rename_target_appearing_later_is_seen(
    store: Store, clock: FixedClock, tmp_path: Path
) -> None:
    """A path deleted since the memory, then its text added under another name: the
    memory's finding turns from deleted to renamed, though its path is not in that commit."""
    project = Project(tmp_path / "project", random.Random(3))
    clock.current = project.when + dt.timedelta(minutes=30)
    memory = store.create("About `lib/g.py`.", title="g")
    text = (project.path / "lib/g.py").read_text()
    project.git("rm", "-q", "lib/g.py")
    project.commit("delete")
    report = check_project(store, project.path)
    assert [f.kind for f in report.memories[0].findings] == ["deleted"]
    project.write("lib/moved.py", text)
    project.commit("re-add")
    report = check_project(store, project.path)
    assert report.to_dict() == _full(store, project.path)
    found = report.memories[0]
    assert found.id == memory.id
    assert [(f.kind, f.new_path) for f in found.findings] == [("renamed", "lib/moved.py")]


def test_project_hook_run_loads_no_secret_patterns_merge_or_search(
    store: Store, clock: FixedClock, tmp_path: Path
) -> None:
    """The post-commit hook's process imports what ``gitmem check`` needs and not the
    secret patterns, merges or searches."""
    project = Project(tmp_path / "project", random.Random(5))
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "GITMEM_"))}
    env["GITMEM_HOME"] = str(home)
    subprocess.run(
        [sys.executable, "-m", "gitmem", "init", "--project", str(project.path)],
        env=env,
        cwd=project.path,
        capture_output=True,
        check=True,
    )
    code = (
        "import sys\n"
        "from gitmem.cli import main\n"
        "try:\n"
        "    main(['hook-run', '--role', 'project', 'post-commit'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('gitmem'))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        cwd=project.path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "gitmem check:" in out
    loaded = set(out.split())
    assert "gitmem.features.lifecycle.anchors" in loaded  # the check did run in this process
    assert not {
        "gitmem.format.secrets",
        "gitmem.store.merge",
        "gitmem.store.search",
    } & loaded
