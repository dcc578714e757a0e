"""What a git hook in a project repository costs: ``gitmem --version`` and a project hook run.

The project hooks (``post-commit``, ``post-merge``, ``post-checkout``) run ``gitmem check``
for the project after the user's git command; issue 4 asks that they stay well under a
second on a 10k-memory store. This scenario builds that case, the worst one: a project of
1,000 files and 101 commits over 50 days, and a project store (``<project>/.gitmem/``) of N
memories that **every one** name a project file in a backtick span, half of them with an
``anchors`` entry too, written at times spread over the project's history (so they compare
from many distinct bases). The hook scripts are installed with ``gitmem hooks install
--project``, and the timed command is the installed ``post-commit`` script itself, as git
runs it. Its baselines, in the same run: ``git rev-parse HEAD`` and ``git status`` in the
project (what a hook costs without gitmem), and the interpreter alone.
"""

from __future__ import annotations

import compileall
import datetime as dt
import random
import resource
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import bench.scenarios  # noqa: F401  (registered first: scenarios run in registration order)
import gitmem
from bench.fixtures import Context
from bench.harness import (
    Row,
    Stopwatch,
    Timed,
    git,
    git_env,
    log,
    measure_alternating,
    median,
    ms,
    scenario,
    size_label,
)
from gitmem.features.lifecycle import check_project

PROJECT_FILES = 1_000
PROJECT_COMMITS = 101
PROJECT_DAYS = 50
_FOLDERS = 25
_WORDS = ("handler", "retry", "cache", "schema", "queue", "worker", "config", "token", "index")


@dataclass
class HookProject:
    """A project repository with a project store of ``size`` memories and gitmem's hooks."""

    path: Path
    store: Path
    size: int
    commits: int
    files: int
    build_seconds: float
    home: Path
    """``GITMEM_HOME`` for the hook: a path with no store, so only the project store is read."""


def _file_text(path: str, revision: int) -> bytes:
    lines = [f"# {path}\n"]
    lines += [f"def step_{k}(value):  # {path} {k}\n    return value + {k}\n" for k in range(20)]
    lines += [f"# revision {r}\n" for r in range(revision)]
    return "".join(lines).encode()


def _inline(path: str, data: bytes) -> bytes:
    return f"M 100644 inline {path}\ndata {len(data)}\n".encode() + data + b"\n"


def build_project(
    path: Path, *, files: int, commits: int, days: int, end: dt.datetime, rng: random.Random
) -> list[str]:
    """A project of ``files`` files and ``commits`` commits spread evenly over ``days`` days
    up to ``end`` (written with git fast-import): the first commit adds every file, each later
    one changes 10 files, and every 3rd adds one, every 5th renames one, every 7th deletes one.
    Returns every path that ever existed."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    current: dict[str, int] = {}
    ever: list[str] = []
    start = end - dt.timedelta(days=days)
    step = (end - start) / max(1, commits - 1)
    stream = bytearray()
    for c in range(commits):
        when = int((start + step * c).timestamp())
        ops: list[bytes] = []
        if c == 0:
            for i in range(files):
                name = f"src/pkg{i % _FOLDERS:02d}/mod{i:04d}.py"
                current[name] = 0
                ever.append(name)
                ops.append(_inline(name, _file_text(name, 0)))
        else:
            for name in rng.sample(sorted(current), min(10, len(current))):
                current[name] += 1
                ops.append(_inline(name, _file_text(name, current[name])))
            if c % 3 == 0:
                name = f"src/pkg{c % _FOLDERS:02d}/new{c:04d}.py"
                current[name] = 0
                ever.append(name)
                ops.append(_inline(name, _file_text(name, 0)))
            if c % 5 == 0:
                old = rng.choice(sorted(current))
                new = old.replace(".py", f"_v{c}.py")
                # Same content under the new name: git's rename detection finds it.
                ops.append(f"D {old}\n".encode() + _inline(new, _file_text(old, current[old])))
                current[new] = current.pop(old)
                ever.append(new)
            if c % 7 == 0:
                gone = rng.choice(sorted(current))
                ops.append(f"D {gone}\n".encode())
                del current[gone]
        message = f"commit {c}\n".encode()
        stream += b"commit refs/heads/main\n"
        stream += f"author dev <dev@example.invalid> {when} +0000\n".encode()
        stream += f"committer dev <dev@example.invalid> {when} +0000\n".encode()
        stream += f"data {len(message)}\n".encode() + message
        stream += b"".join(ops) + b"\n"
    git(path, "fast-import", "--quiet", "--date-format=raw", stdin=bytes(stream))
    git(path, "checkout", "-q", "-f", "main")
    return ever


def populate_anchored(
    store_path: Path,
    paths: list[str],
    size: int,
    *,
    start: dt.datetime,
    end: dt.datetime,
    rng: random.Random,
    named_every: int = 1,
) -> None:
    """``size`` memories in one transaction, every ``named_every``-th one naming a project
    path in its body and every other of those also anchoring one in its front-matter (the
    rest name nothing); ``updated_at`` spread evenly from ``start`` to ``end`` (so the
    memories compare from many project commits)."""
    clock = gitmem.FixedClock(start)
    store = gitmem.open(store_path, clock=clock)
    step = (end - start) / max(1, size)
    with store.transaction(message=f"import: {size} anchored benchmark memories"):
        for i in range(size):
            clock.current = start + step * i
            named = rng.choice(paths)
            words = " ".join(rng.choices(_WORDS, k=12))
            if i % named_every:
                store.create(f"Memory {i}: {words}.\n", title=f"Memory {i}")
                continue
            body = f"Memory {i}: the code is in `{named}:{rng.randint(1, 40)}`. {words}.\n"
            extra = {"anchors": [rng.choice(paths)]} if (i // named_every) % 2 == 0 else None
            store.create(body, title=f"Anchored memory {i}", extra=extra)
    store.index().catch_up()


def hook_project(ctx: Context, size: int, named_every: int = 1) -> HookProject:
    """The project, its store of ``size`` memories, gitmem's hooks installed; the index and
    the named-paths cache warmed by one check (untimed)."""
    root = ctx.new_dir(f"hook-project-{size_label(size)}-{named_every}")
    project = root / "project"
    end = dt.datetime.now(dt.UTC).replace(microsecond=0) - dt.timedelta(hours=1)
    home = root / "no-user-store"
    with Stopwatch() as watch:
        log(f"writing a project of {PROJECT_FILES:,} files and {PROJECT_COMMITS} commits...")
        paths = build_project(
            project,
            files=PROJECT_FILES,
            commits=PROJECT_COMMITS,
            days=PROJECT_DAYS,
            end=end,
            rng=ctx.rng,
        )
        log(f"importing {size:,} anchored memories into the project store...")
        store = gitmem.init_project(project)
        populate_anchored(
            Path(store.db().path),
            paths,
            size,
            start=end - dt.timedelta(days=PROJECT_DAYS + 1),
            end=end,
            rng=ctx.rng,
            named_every=named_every,
        )
        gitmem_cli(project, "hooks", "install", "--project", str(project), home=home)
        # An installed gitmem has its bytecode; a development tree edited since its last
        # import (and PYTHONDONTWRITEBYTECODE set) would have the hook compile sources.
        compileall.compile_dir(str(Path(gitmem.__file__).parent), quiet=1)
    log(f"  {watch.seconds:.1f} s")
    return HookProject(
        project, project / ".gitmem", size, PROJECT_COMMITS, PROJECT_FILES, watch.seconds, home
    )


def hook_env(home: Path) -> dict[str, str]:
    """The environment a hook runs in: the user's git config shut out, no user store."""
    env = git_env()
    env.pop("GITMEM_DIR", None)
    env["GITMEM_HOME"] = str(home)
    return env


def gitmem_cli(cwd: Path, *args: str, home: Path) -> str:
    env = hook_env(home)
    result = subprocess.run(
        [sys.executable, "-m", "gitmem", *args], cwd=cwd, capture_output=True, env=env, check=False
    )
    if result.returncode != 0:
        raise RuntimeError(f"gitmem {' '.join(args)} failed: {result.stderr.decode().strip()}")
    return result.stdout.decode()


@dataclass
class Process:
    """One command timed as a process, and the CPU time it used per call (its own and its
    children's: what a loaded machine does not inflate as much as wall-clock time)."""

    timed: Timed
    cpu: list[float]
    walls: list[float]

    def timed_calls(self) -> int:
        return self.timed.ops * max(1, len(self.timed.walls))

    def cpu_ms(self) -> float:
        return ms(median(self.cpu[-self.timed_calls() :]))

    def wall_ms(self) -> float:
        """Median wall time of the command alone (without what ``prepare`` did)."""
        return ms(median(self.walls[-self.timed_calls() :]))


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _process(
    command: list[str],
    cwd: Path,
    env: dict[str, str],
    expect: bytes = b"",
    prepare: Callable[[int], object] | None = None,
) -> Process:
    """Timed runs of one command as a process (one call per op; output checked, not printed).
    ``prepare(i)`` runs before each call, inside the op; :attr:`Process.walls` holds the
    command's own wall time per call, without it."""
    cpu: list[float] = []
    walls: list[float] = []

    def op(i: int) -> None:
        if prepare is not None:
            prepare(i)
        before = _children_cpu()
        t0 = time.perf_counter()
        result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, check=False)
        walls.append(time.perf_counter() - t0)
        cpu.append(_children_cpu() - before)
        if result.returncode != 0 or expect not in result.stdout + result.stderr:
            raise AssertionError(
                f"{' '.join(command)} exited {result.returncode}: "
                f"{(result.stdout + result.stderr).decode(errors='replace')[-300:]}"
            )

    return Process(Timed(op, 1, 1), cpu, walls)


def _new_commit(hp: HookProject, env: dict[str, str]) -> Callable[[int], object]:
    """Before a timed hook run: one more project commit that edits 3 files (made with the
    hooks off, untimed), as the post-commit hook sees after ``git commit``."""
    files = sorted(p for p in git(hp.path, "ls-files").split() if p.endswith(".py"))
    rng = random.Random(len(files))

    def prepare(i: int) -> None:
        for name in rng.sample(files, 3):
            with (hp.path / name).open("a") as out:
                out.write(f"# benchmark edit {i}\n")
        subprocess.run(
            ["git", "-c", f"core.hooksPath={hp.home}", "commit", "-q", "-a", "-m", f"edit {i}"],
            cwd=hp.path,
            env=env,
            check=True,
            capture_output=True,
        )

    return prepare


def _forget(hp: HookProject) -> Callable[[int], object]:
    """Before a timed hook run: forget the saved run, as after a store write or a pull (the
    hook then checks every memory)."""
    cache = gitmem.open(hp.store).db().state_dir / "lifecycle-named.sqlite"

    def prepare(_: int) -> None:
        with sqlite3.connect(cache) as db:
            db.execute("DELETE FROM runs")
        db.close()

    return prepare


def _met(size: int, p50_ms: float) -> bool | None:
    """ "Well under a second" read as at most half of one (judged at 10k memories only)."""
    return p50_ms <= 500.0 if size >= 10_000 else None


def _calls(ctx: Context) -> int:
    """Timed calls per run of a process (each takes a fraction of a second)."""
    return 1 if ctx.config.mode == "tiny" else 5


@scenario("hook-run", "gitmem start-up and a project hook run, as processes")
def hook_run(ctx: Context) -> list[Row]:
    config = ctx.config
    size = config.hook_size
    hp = hook_project(ctx, size)
    env = hook_env(hp.home)
    python = sys.executable
    calls = _calls(ctx)
    # One untimed check first: it fills the named-paths cache, as the first hook after
    # install does; every later hook run is the warm case timed below.
    with Stopwatch() as first:
        summary = gitmem_cli(hp.path, "check", "--project", str(hp.path), home=hp.home).strip()
    log(f"first check (cold cache) {first.seconds:.2f} s: {summary}")

    def timed(
        command: list[str], expect: bytes = b"", prepare: Callable[[int], object] | None = None
    ) -> Process:
        item = _process(command, hp.path, env, expect, prepare)
        item.timed.ops = calls
        return item

    store = gitmem.open(hp.store)
    check = Timed(lambda _: check_project(store, hp.path, incremental=False), calls, 1)
    hook = [str(hp.path / ".git" / "hooks" / "post-commit")]
    processes = [
        timed([python, "-m", "gitmem", "--version"], b"gitmem, version"),
        timed([python, "-c", "pass"]),
        timed(["git", "--version"]),
        timed(hook, b"gitmem check:", _new_commit(hp, env)),
        timed(hook, b"gitmem check:", _forget(hp)),
        timed(["git", "rev-parse", "HEAD"]),
        timed(["git", "status", "--porcelain"]),
    ]
    log(f"timing {len(processes) + 1} commands, {calls} calls per run, {config.repeat} runs each")
    stats = measure_alternating([p.timed for p in processes] + [check], config.repeat)
    version, _, _, carried, full, _, _, library = stats
    wall = [p.wall_ms() for p in processes]
    cpu = [f"{p.cpu_ms():,.0f}" for p in processes]
    label = f"{size_label(size)} memories"
    each = f"{calls} calls per run"
    start = "`python -m gitmem --version` as a process"
    hook_title = "project `post-commit` hook after a new commit (the check carried over)"
    full_title = "project `post-commit` hook, full check (no saved run: after a store write)"
    found = summary.removeprefix("gitmem check: ")
    fixture = (
        f"every memory names a project file, half also anchor one; project of "
        f"{hp.files:,} files, {hp.commits} commits over {PROJECT_DAYS} days; {found}"
    )
    return [
        Row(
            start,
            "—",
            "p50 ms",
            wall[0],
            "`python -c pass` (the interpreter alone)",
            wall[1],
            higher_is_better=False,
            runs=version.runs,
            note=f"CPU per call: {cpu[0]} ms, the interpreter {cpu[1]} ms; {each}",
        ),
        Row(
            start,
            "—",
            "p50 ms",
            wall[0],
            "`git --version`",
            wall[2],
            higher_is_better=False,
            runs=version.runs,
            note=f"CPU per call: {cpu[2]} ms",
        ),
        Row(
            hook_title,
            label,
            "p50 ms",
            wall[3],
            "`git rev-parse HEAD` in the project",
            wall[5],
            higher_is_better=False,
            runs=carried.runs,
            target="well under 1 s at 10k (≤ 0.5 s)",
            met=_met(size, wall[3]),
            note=f"the installed script (`python -m gitmem hook-run --role project "
            f"post-commit`) after a commit editing 3 files, made untimed before each call; "
            f"{fixture}; CPU per call: {cpu[3]} ms (git rev-parse {cpu[5]} ms); {each}",
        ),
        Row(
            full_title,
            label,
            "p50 ms",
            wall[4],
            "`git status --porcelain` in the project",
            wall[6],
            higher_is_better=False,
            runs=full.runs,
            target="well under 1 s at 10k (≤ 0.5 s)",
            met=_met(size, wall[4]),
            note=f"the saved run deleted before each call; CPU per call: {cpu[4]} ms "
            f"(git status {cpu[6]} ms); {each}",
        ),
        Row(
            "`check_project(incremental=False)` in-process, cache warm (the library part of "
            "a full check)",
            label,
            "p50 ms",
            ms(library.p50),
            compare="none",
            runs=library.runs,
            note=f"{ms(1 / library.cpu_rate):,.0f} ms of CPU per call; first run, cache "
            f"cold, as a process: {first.seconds:.2f} s; {each}",
        ),
    ]


@scenario("hook-run-typical", "a project hook run when 1 memory in 10 names a project file")
def hook_run_typical(ctx: Context) -> list[Row]:
    size = ctx.config.hook_size
    hp = hook_project(ctx, size, named_every=10)
    env = hook_env(hp.home)
    calls = _calls(ctx)
    summary = gitmem_cli(hp.path, "check", "--project", str(hp.path), home=hp.home).strip()
    script = [str(hp.path / ".git" / "hooks" / "post-commit")]
    hook = _process(script, hp.path, env, b"gitmem check:", _new_commit(hp, env))
    full = _process(script, hp.path, env, b"gitmem check:", _forget(hp))
    rev_parse = _process(["git", "rev-parse", "HEAD"], hp.path, env)
    for item in (hook, full, rev_parse):
        item.timed.ops = calls
    run, _, _ = measure_alternating([hook.timed, full.timed, rev_parse.timed], ctx.config.repeat)
    label = f"{size_label(size)} memories"
    found = summary.removeprefix("gitmem check: ")
    return [
        Row(
            "project `post-commit` hook after a new commit, 1 memory in 10 names a project file",
            label,
            "p50 ms",
            hook.wall_ms(),
            "`git rev-parse HEAD` in the project",
            rev_parse.wall_ms(),
            higher_is_better=False,
            runs=run.runs,
            target="well under 1 s at 10k (≤ 0.5 s)",
            met=_met(size, hook.wall_ms()),
            note=f"a commit editing 3 files made untimed before each call; {found}; "
            f"CPU per call: {hook.cpu_ms():,.0f} ms; {calls} calls per run",
        ),
        Row(
            "the same hook, full check (no saved run: after a store write)",
            label,
            "p50 ms",
            full.wall_ms(),
            "`git rev-parse HEAD` in the project",
            rev_parse.wall_ms(),
            higher_is_better=False,
            runs=run.runs,
            target="well under 1 s at 10k (≤ 0.5 s)",
            met=_met(size, full.wall_ms()),
            note=f"the saved run deleted before each call; CPU per call: "
            f"{full.cpu_ms():,.0f} ms; {calls} calls per run",
        ),
    ]
