"""The benchmark machinery: configuration, timing, result rows and the scenario registry.

A scenario is a function ``(ctx) -> list[Row]`` registered with :func:`scenario`. It asks
the :class:`bench.fixtures.Context` for the stores and checkouts it needs (built once per
run and shared), times gitmem and its baseline with :func:`measure_alternating`, and returns rows
for the table. A scenario whose feature does not exist yet names a ``requires`` check: the
runner then reports it as pending instead of failing.
"""

from __future__ import annotations

import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench.fixtures import Context

# -- configuration ---------------------------------------------------------------------


@dataclass
class Config:
    """Sizes and repetitions of one benchmark run (see :func:`preset`)."""

    mode: str
    sizes: list[int]
    """Store sizes for single-memory create into a bare store, and bulk import."""
    worktree_sizes: list[int]
    read_size: int
    """Store size for read by id, store size on disk, and (later) search."""
    history_commits: int
    latest_size: int
    writers: list[int]
    writers_size: int
    repeat: int
    ops: int
    """gitmem creates (and plain file writes) per timed run."""
    git_ops: int
    """``git add`` + ``git commit`` rounds per timed run (each forks git twice)."""
    reads: int
    writer_ops: int
    catchup_commits: int = 10_000
    """New commits the index catches up with (issue: 10k, on a 100k store)."""
    hook_size: int = 10_000
    """Memories in the project store of the hook-run scenario (issue 4: 10k)."""
    budget: float = 120.0
    """Seconds after which a scenario whose single run takes long stops repeating it."""
    slow_repeat: int = 3
    """Timed runs of operations that take seconds each (history, latest_version)."""
    history_updates: int = 5
    bulk_repeat_max: int = 2_000
    """Bulk imports of at most this many memories are repeated; larger ones run once."""
    warmup: int = 3
    seed: int = 20261122
    workdir: Path | None = None
    keep: bool = False
    only: list[str] = field(default_factory=list)
    skip: list[str] = field(default_factory=list)


def preset(mode: str) -> Config:
    """The named size presets: ``full`` (the issue's sizes), ``quick`` (~1 min), ``tiny``."""
    if mode == "full":
        return Config(
            mode="full",
            # The sizes are 1k, 10k and 100k memories, 100k commits and a catch-up
            # of 10k commits. Importing 100k memories takes minutes and the index's
            # per-commit tree diff grows with the store (a 20k-commit rebuild took 217 s,
            # a 10k catch-up 508 s), so the defaults stop where a run takes minutes; the
            # table names the option that sets each one.
            sizes=[1_000, 10_000],
            worktree_sizes=[1_000, 10_000],
            read_size=10_000,
            history_commits=10_000,
            latest_size=10_000,
            writers=[1, 2, 4, 8],
            writers_size=10_000,
            repeat=5,
            ops=100,
            git_ops=20,
            reads=1_000,
            writer_ops=50,
            catchup_commits=2_000,
            budget=60.0,
        )
    if mode == "quick":
        return Config(
            mode="quick",
            sizes=[200, 1_000],
            worktree_sizes=[200, 1_000],
            read_size=1_000,
            history_commits=2_000,
            latest_size=1_000,
            writers=[1, 2, 4, 8],
            writers_size=1_000,
            repeat=3,
            ops=50,
            git_ops=12,
            reads=300,
            writer_ops=15,
            bulk_repeat_max=500,
            catchup_commits=500,
            budget=10.0,
            hook_size=2_000,
        )
    if mode == "tiny":
        return Config(
            mode="tiny",
            sizes=[20],
            worktree_sizes=[20],
            read_size=20,
            history_commits=30,
            latest_size=20,
            writers=[1, 2],
            writers_size=20,
            repeat=1,
            ops=3,
            git_ops=2,
            reads=10,
            writer_ops=3,
            slow_repeat=1,
            warmup=1,
            catchup_commits=10,
            budget=5.0,
            hook_size=30,
        )
    raise ValueError(f"unknown mode {mode!r}")


def sizes_config(base: Config, sizes: Sequence[int]) -> Config:
    """``--sizes``: the other sizes follow the largest one, capped where a scenario is slow."""
    top = max(sizes)
    base.sizes = sorted(set(sizes))
    base.worktree_sizes = [n for n in base.sizes if n <= 10_000] or [min(base.sizes)]
    base.read_size = top
    base.history_commits = max(min(top, base.history_commits), base.history_updates + 2)
    base.latest_size = top
    base.writers_size = min(top, 10_000)
    base.mode = f"{base.mode}, sizes {','.join(size_label(n) for n in base.sizes)}"
    return base


# -- statistics ---------------------------------------------------------------------------


def percentile(values: Sequence[float], pct: float) -> float:
    """The ``pct`` percentile with linear interpolation between closest ranks."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    rank = (len(ordered) - 1) * pct / 100.0
    low = math.floor(rank)
    high = math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


@dataclass(frozen=True)
class OpStats:
    """Repeated timed runs of one operation: per-run throughput and latency percentiles."""

    rates: list[float]
    """Operations per second of wall time, one per run."""
    p50s: list[float]
    """Median latency of one operation in seconds, one per run."""
    p99s: list[float]
    cpu_rates: list[float]
    """Operations per second of this process's CPU time, one per run. Other work on the
    machine barely moves it, so it shows what wall-clock figures lose to a busy machine
    (meaningless for baselines that run in a child process)."""
    ops: int

    @property
    def runs(self) -> int:
        return len(self.rates)

    @property
    def rate(self) -> float:
        return statistics.median(self.rates)

    @property
    def cpu_rate(self) -> float:
        return statistics.median(self.cpu_rates)

    @property
    def p50(self) -> float:
        return statistics.median(self.p50s)

    @property
    def p99(self) -> float:
        return statistics.median(self.p99s)


@dataclass
class Timed:
    """One operation to time: ``op(i)`` is called with a counter unique across all its calls."""

    op: Callable[[int], object]
    ops: int
    warmup: int
    counter: int = 0
    latencies: list[list[float]] = field(default_factory=list)
    walls: list[float] = field(default_factory=list)
    cpus: list[float] = field(default_factory=list)

    def warm(self) -> None:
        for _ in range(self.warmup):
            self.op(self.counter)
            self.counter += 1

    def run(self) -> None:
        clock, cpu = time.perf_counter, time.process_time
        latencies: list[float] = []
        cpu_start = cpu()
        run_start = clock()
        for _ in range(self.ops):
            t0 = clock()
            self.op(self.counter)
            latencies.append(clock() - t0)
            self.counter += 1
        self.walls.append(clock() - run_start)
        self.cpus.append(cpu() - cpu_start)
        self.latencies.append(latencies)

    def stats(self) -> OpStats:
        return OpStats(
            rates=[self.ops / w if w > 0 else math.inf for w in self.walls],
            p50s=[percentile(lat, 50) for lat in self.latencies],
            p99s=[percentile(lat, 99) for lat in self.latencies],
            cpu_rates=[self.ops / c if c > 0 else math.inf for c in self.cpus],
            ops=self.ops,
        )


def measure_alternating(items: Sequence[Timed], repeat: int) -> list[OpStats]:
    """Time ``repeat`` runs of each item, alternating items run by run, after their warm-ups.

    Alternating puts gitmem and its baseline under the same conditions: a burst of other
    work on the machine lands on both instead of on whichever ran at the time.
    """
    for item in items:
        item.warm()
    for _ in range(repeat):
        for item in items:
            item.run()
    return [item.stats() for item in items]


def measure_ops(op: Callable[[int], object], *, ops: int, repeat: int, warmup: int) -> OpStats:
    """Time ``repeat`` runs of ``ops`` calls of ``op(i)`` after ``warmup`` untimed calls."""
    return measure_alternating([Timed(op, ops, warmup)], repeat)[0]


def measure_budget(op: Callable[[], object], *, runs: int, budget: float) -> list[float]:
    """Seconds of up to ``runs`` calls of ``op``; stops early once ``budget`` seconds are spent
    (an operation that takes minutes is measured once, and the table says so)."""
    seconds: list[float] = []
    spent = 0.0
    while len(seconds) < runs and (not seconds or spent < budget):
        t0 = time.perf_counter()
        op()
        seconds.append(time.perf_counter() - t0)
        spent += seconds[-1]
    return seconds


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


# -- result rows ---------------------------------------------------------------------------


@dataclass
class Row:
    """One line of the table: a gitmem figure beside its baseline."""

    scenario: str
    size: str
    metric: str
    value: float | None
    baseline: str = ""
    baseline_value: float | None = None
    higher_is_better: bool = True
    compare: str = "speed"
    """``speed``: the ratio says how many times faster gitmem is; ``size``: x times the raw bytes;
    ``quality``: x times the baseline's score (recall@k, MRR); ``none``: no ratio."""
    runs: int = 0
    target: str = ""
    met: bool | None = None
    note: str = ""

    def ratio(self) -> float | None:
        """gitmem's advantage over the baseline (> 1: gitmem better), for speed rows."""
        if self.value is None or self.baseline_value is None:
            return None
        if self.compare == "size":
            return self.value / self.baseline_value if self.baseline_value else None
        if self.higher_is_better:
            return self.value / self.baseline_value if self.baseline_value else None
        return self.baseline_value / self.value if self.value else None

    def ratio_text(self) -> str:
        ratio = self.ratio()
        if ratio is None or self.compare == "none":
            return "—"
        if self.compare == "quality":  # a score beside the baseline's: x times its value
            return f"{ratio:.2f}x baseline"
        if self.compare == "size":
            return f"{ratio:.2f}x raw"
        if 0.995 <= ratio <= 1.005:
            return "1.00x (same)"
        if ratio >= 1:
            return f"**{fmt_ratio(ratio)}x faster**"
        return f"{fmt_ratio(1 / ratio)}x slower"

    def to_dict(self) -> dict[str, object]:
        return {
            "scenario": self.scenario,
            "size": self.size,
            "metric": self.metric,
            "value": self.value,
            "baseline": self.baseline,
            "baseline_value": self.baseline_value,
            "ratio": self.ratio(),
            "runs": self.runs,
            "target": self.target,
            "met": self.met,
            "note": self.note,
        }


def fmt_ratio(ratio: float) -> str:
    if ratio >= 100:
        return f"{ratio:,.0f}"
    if ratio >= 10:
        return f"{ratio:.1f}"
    return f"{ratio:.2f}"


def fmt_value(value: float | None) -> str:
    """Three significant digits, thousands separated; small values keep their decimals."""
    if value is None:
        return "—"
    if math.isinf(value):
        return "∞"
    if value == 0:
        return "0"
    magnitude = abs(value)
    if magnitude >= 1000:
        return f"{value:,.0f}"
    if magnitude >= 100:
        return f"{value:.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    if magnitude >= 1:
        return f"{value:.2f}"
    digits = 2 - math.floor(math.log10(magnitude))
    return f"{value:.{digits}f}"


def size_label(n: int) -> str:
    if n >= 1000 and n % 1000 == 0:
        return f"{n // 1000}k"
    return str(n)


def ms(seconds: float) -> float:
    return seconds * 1000.0


# -- the scenario registry -------------------------------------------------------------------

ScenarioFunc = Callable[["Context"], list[Row]]


@dataclass(frozen=True)
class Scenario:
    name: str
    title: str
    func: ScenarioFunc
    requires: Callable[[], str | None] | None = None
    """Returns why the scenario cannot run yet (a missing feature), or None when it can."""


SCENARIOS: dict[str, Scenario] = {}
"""Every registered scenario, in the order they run (registration order)."""


def scenario(
    name: str, title: str, *, requires: Callable[[], str | None] | None = None
) -> Callable[[ScenarioFunc], ScenarioFunc]:
    """Register a scenario under ``name`` (used by ``--only``/``--skip``)."""

    def register(func: ScenarioFunc) -> ScenarioFunc:
        if name in SCENARIOS:
            raise ValueError(f"scenario {name!r} registered twice")
        SCENARIOS[name] = Scenario(name, title, func, requires)
        return func

    return register


# -- running git and logging -----------------------------------------------------------------


def git_env() -> dict[str, str]:
    """An environment that keeps the user's git configuration out of the baselines."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY"}
    }
    env.update(
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_AUTHOR_NAME="bench",
        GIT_AUTHOR_EMAIL="bench@bench.invalid",
        GIT_COMMITTER_NAME="bench",
        GIT_COMMITTER_EMAIL="bench@bench.invalid",
        GIT_TERMINAL_PROMPT="0",
        LC_ALL="C",
    )
    return env


_GIT_ENV: dict[str, str] | None = None


def git(
    cwd: Path, *args: str, stdin: bytes | None = None, stdin_path: Path | None = None
) -> str:
    """Run the git binary in ``cwd`` (automatic gc off, so it never runs inside a timing)."""
    global _GIT_ENV
    if _GIT_ENV is None:
        _GIT_ENV = git_env()
    command = ["git", "-c", "gc.auto=0", "-c", "maintenance.auto=false", *args]
    if stdin_path is not None:
        with open(stdin_path, "rb") as fh:
            result = subprocess.run(
                command, cwd=cwd, stdin=fh, capture_output=True, env=_GIT_ENV, check=False
            )
    else:
        result = subprocess.run(
            command, cwd=cwd, input=stdin, capture_output=True, env=_GIT_ENV, check=False
        )
    if result.returncode != 0:
        raise RuntimeError(
            f"git {' '.join(args)} failed in {cwd} ({result.returncode}): "
            f"{result.stderr.decode(errors='replace').strip()}"
        )
    return result.stdout.decode(errors="replace")


_QUIET = False


def set_quiet(quiet: bool) -> None:
    global _QUIET
    _QUIET = quiet


def log(message: str) -> None:
    """Progress on stderr, so stdout carries only the table."""
    if not _QUIET:
        print(f"[bench] {message}", file=sys.stderr, flush=True)


class Stopwatch:
    """``with Stopwatch() as sw: ...`` then ``sw.seconds``."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._start = 0.0

    def __enter__(self) -> Stopwatch:
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self._start


def run_spawned(
    target: Callable[..., None], each: Sequence[tuple[object, ...]], timeout: float = 900
) -> list[Any]:
    """Start one spawned process per argument tuple in ``each``, calling ``target(*args,
    barrier, out)``, and return what each put on ``out`` (in the order they finished). The
    processes meet at ``barrier`` before their timed part, so all start it together."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(len(each))
    out = ctx.Queue()
    procs = [ctx.Process(target=target, args=(*args, barrier, out)) for args in each]
    for proc in procs:
        proc.start()
    results = [out.get(timeout=timeout) for _ in procs]
    for proc in procs:
        proc.join()
    return results
