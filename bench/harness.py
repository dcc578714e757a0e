"""The benchmark machinery: configuration, timing, result rows and the scenario registry.

A scenario is a function ``(ctx) -> list[Row]`` registered with :func:`scenario`; ``ctx``
is a :class:`bench.fixtures.Context`, which builds the stores a scenario asks for once per
run. It times gitmem and its baseline with :func:`measure_alternating` and returns rows.
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
from typing import Any

# -- configuration ---------------------------------------------------------------------


@dataclass
class Config:
    """Sizes and repetitions of one benchmark run (see :func:`preset`)."""

    mode: str
    create_size: int
    """Memories in the bare store that single creates go into."""
    read_size: int
    """Memories in the store the CLI commands read."""
    recall_size: int
    """Memories in the store recall latency is measured on."""
    history_commits: int
    graph_size: int
    """Entities created through MCP before the graph tools are timed."""
    repeat: int
    ops: int
    """gitmem creates per timed run."""
    git_ops: int
    """``git add`` + ``git commit`` rounds per timed run (each forks git twice)."""
    slow_repeat: int = 3
    """Timed runs of operations that take a second or more."""
    history_updates: int = 5
    warmup: int = 3
    seed: int = 20261122
    workdir: Path | None = None
    keep: bool = False
    only: list[str] = field(default_factory=list)
    skip: list[str] = field(default_factory=list)


def preset(mode: str) -> Config:
    """``full``: the sizes the floors name (tens of minutes); ``quick``: minutes; ``tiny``:
    seconds, to prove the command works."""
    if mode == "full":
        return Config(
            mode="full", create_size=20_000, read_size=1_000, recall_size=10_000,
            history_commits=100_000, graph_size=10_000, repeat=5, ops=100, git_ops=20,
        )  # fmt: skip
    if mode == "quick":
        return Config(
            mode="quick", create_size=1_000, read_size=1_000, recall_size=1_000,
            history_commits=2_000, graph_size=1_000, repeat=3, ops=50, git_ops=12,
        )  # fmt: skip
    if mode == "tiny":
        return Config(
            mode="tiny", create_size=20, read_size=20, recall_size=20, history_commits=30,
            graph_size=50, repeat=1, ops=3, git_ops=2, slow_repeat=1, warmup=1,
        )  # fmt: skip
    raise ValueError(f"unknown mode {mode!r}")


# -- statistics ---------------------------------------------------------------------------


def percentile(values: Sequence[float], pct: float) -> float:
    """The ``pct`` percentile with linear interpolation between closest ranks."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * pct / 100.0
    low, high = math.floor(rank), math.ceil(rank)
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
    """Operations per second of this process's CPU time, one per run: what a busy machine
    barely moves (meaningless for baselines that run in a child process)."""

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
        cpu_start, run_start = cpu(), clock()
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


def command_timed(command: list[str], cwd: Path, env: dict[str, str]) -> Timed:
    """One call of ``command`` as a process per op (output captured; a failure raises)."""

    def op(_: int) -> None:
        result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, check=False)
        if result.returncode != 0:
            raise AssertionError(
                f"{' '.join(command)} exited {result.returncode}: "
                f"{(result.stdout + result.stderr).decode(errors='replace')[-300:]}"
            )

    return Timed(op, 1, 1)


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
        """gitmem's figure over the baseline's (> 1: gitmem better, for speed rows)."""
        if self.value is None or not self.baseline_value:
            return None
        if self.higher_is_better or self.compare == "size":
            return self.value / self.baseline_value
        return self.baseline_value / self.value if self.value else None

    def ratio_text(self) -> str:
        ratio = self.ratio()
        if ratio is None or self.compare == "none":
            return "—"
        if self.compare == "quality":
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
    return f"{ratio:.1f}" if ratio >= 10 else f"{ratio:.2f}"


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
    if magnitude >= 1:
        return f"{value:.{3 - len(str(int(magnitude)))}f}"
    digits = 2 - math.floor(math.log10(magnitude))
    return f"{value:.{digits}f}"


def size_label(n: int) -> str:
    return f"{n // 1000}k" if n >= 1000 and n % 1000 == 0 else str(n)


def ms(seconds: float) -> float:
    return seconds * 1000.0


# -- the scenario registry -------------------------------------------------------------------


@dataclass(frozen=True)
class Scenario:
    name: str
    title: str
    func: Callable[[Any], list[Row]]
    """Called with the run's :class:`bench.fixtures.Context`."""
    requires: Callable[[], str | None] | None = None
    """Returns why the scenario cannot run here (a missing extra), or None when it can."""


SCENARIOS: dict[str, Scenario] = {}
"""Every registered scenario, in the order they run (registration order)."""


def scenario(
    name: str, title: str, *, requires: Callable[[], str | None] | None = None
) -> Callable[[Callable[[Any], list[Row]]], Callable[[Any], list[Row]]]:
    """Register a scenario under ``name`` (used by ``--only``/``--skip``)."""

    def register(func: Callable[[Any], list[Row]]) -> Callable[[Any], list[Row]]:
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


def cli_env(home: Path) -> dict[str, str]:
    """The environment gitmem's commands run in: git's user config shut out, no user store."""
    env = git_env()
    env.pop("GITMEM_DIR", None)
    env["GITMEM_HOME"] = str(home)
    return env


def git(cwd: Path, *args: str, stdin: bytes | None = None) -> str:
    """Run the git binary in ``cwd`` (automatic gc off, so it never runs inside a timing)."""
    command = ["git", "-c", "gc.auto=0", "-c", "maintenance.auto=false", *args]
    result = subprocess.run(
        command, cwd=cwd, input=stdin, capture_output=True, env=git_env(), check=False
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
