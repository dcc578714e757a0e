"""Everyday commands as processes: ``gitmem ls``, ``search``, ``show``, ``recall`` and ``add``
beside ``python -c pass``, the interpreter's own start, in the same run.

    python -m bench.clibench                # 1,000 memories, 21 rounds
    python -m bench --only cli-latency      # the same, as a row of the benchmark table

Each round runs ``python -c pass`` and each command once, in turn, so a burst of other
work on the machine lands on all of them; the reads first (their index stays current),
then ``add``. ``recall`` runs with the default embedder and, as ``recall (words only)``,
with embeddings off in the user's configuration. Medians of wall and CPU time (the process
and its children). The floors: ``ls``, ``search``, ``show`` at most 100 ms and 10x
``python -c pass``; ``add`` at most 200 ms and 20x; ``recall`` at most 250 ms and 2x
``recall (words only)``.
"""

from __future__ import annotations

import argparse
import compileall
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median

import gitmem
from bench.fixtures import Context, populate
from bench.harness import Row, cli_env, scenario, size_label

FLOORS = {
    "ls": (100.0, 10.0, "pass"),
    "search": (100.0, 10.0, "pass"),
    "show": (100.0, 10.0, "pass"),
    "recall": (250.0, 2.0, "words"),
    "add": (200.0, 20.0, "pass"),
}
"""Per command: (ms, times the baseline command, the baseline), both to be met."""
NAMES = {"pass": "python -c pass", "words": "gitmem recall (words only)"}


@dataclass
class Timing:
    """The wall and CPU seconds of each run of one command."""

    walls: list[float] = field(default_factory=list)
    cpus: list[float] = field(default_factory=list)

    def run(self, command: list[str], env: dict[str, str]) -> None:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        done = subprocess.run(command, env=env, capture_output=True, check=False)
        self.walls.append(time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.cpus.append(
            after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        )
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)}: {done.stderr.decode(errors='replace')}")

    def wall_ms(self) -> float:
        return 1000 * median(self.walls)

    def cpu_ms(self) -> float:
        return 1000 * median(self.cpus)


def measure(store: Path, memory_id: str, home: Path, rounds: int) -> dict[str, Timing]:
    """Timings of ``python -c pass`` (key ``pass``) and the four commands on ``store``."""
    # An installed gitmem has its bytecode; a development tree may not.
    compileall.compile_dir(str(Path(gitmem.__file__).parent), quiet=1)
    script = Path(sys.executable).parent / "gitmem"
    gm = [str(script)] if script.exists() else [sys.executable, "-m", "gitmem"]
    gm += ["--store", str(store)]
    question = ["recall", "how", "do", "we", "retry", "a", "migration?"]
    commands = {
        "pass": [sys.executable, "-c", "pass"],
        "ls": [*gm, "ls"],
        "search": [*gm, "search", "migration"],
        "show": [*gm, "show", memory_id],
        "recall": [*gm, *question],
        "words": [*gm, *question],
        "add": [*gm, "add", "A memory added by the benchmark.", "--title", "bench"],
    }
    env = cli_env(home)
    words_only = home / "embeddings-off.yaml"
    words_only.write_text("embedder: none\n")
    envs = {name: env for name in commands} | {"words": {**env, "GITMEM_CONFIG": str(words_only)}}
    timings = {name: Timing() for name in commands}
    for phase in (("pass", "ls", "search", "show", "recall", "words"), ("pass", "add")):
        for name in phase:  # warm-up: the page cache, the index caught up, vectors made
            Timing().run(commands[name], envs[name])
        for _ in range(rounds):
            for name in phase:
                timings[name].run(commands[name], envs[name])
    return timings


def report(timings: dict[str, Timing]) -> list[tuple[str, float, float, float, bool | None]]:
    """(command, median wall ms, its ratio to ``python -c pass``, median CPU ms, its floor
    met: None for a baseline)."""
    base = timings["pass"].wall_ms()
    out: list[tuple[str, float, float, float, bool | None]] = []
    for name in ("pass", "words"):
        wall = timings[name].wall_ms()
        out.append((NAMES[name], wall, wall / base, timings[name].cpu_ms(), None))
    for name, (most, times, baseline) in FLOORS.items():
        wall = timings[name].wall_ms()
        met = wall <= most and wall <= times * timings[baseline].wall_ms()
        out.append((f"gitmem {name}", wall, wall / base, timings[name].cpu_ms(), met))
    return out


@scenario("cli-latency", "ls, search, show, recall and add as processes, beside python -c pass")
def cli_latency(ctx: Context) -> list[Row]:
    populated = ctx.bare_store(ctx.config.read_size)
    ctx.indexed(populated.path)
    memory_id = populated.ids[len(populated.ids) // 2]
    timings = measure(populated.path, memory_id, ctx.new_dir("cli-home"), ctx.config.repeat)
    load = os.getloadavg()[0]
    rows = []
    for name, wall, ratio, cpu, met in report(timings):
        command = name.split()[-1]
        if met is None:
            continue
        most, times, baseline = FLOORS[command]
        rows.append(
            Row(
                f"CLI: {name}",
                f"{size_label(populated.size)} memories",
                "p50 ms",
                wall,
                f"`{NAMES[baseline]}`",
                timings[baseline].wall_ms(),
                higher_is_better=False,
                compare="none",
                runs=len(timings[command].walls),
                target=f"≤ {most:.0f} ms and ≤ {times:.0f}x {NAMES[baseline]}",
                met=met,
                note=f"{ratio:.1f}x python -c pass; CPU {cpu:.0f} ms; load average {load:.1f}",
            )
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=1_000, help="memories in the store")
    parser.add_argument("--rounds", type=int, default=21, help="runs of each command")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gitmem-clibench-") as tmp:
        root = Path(tmp)
        home = root / "home"
        home.mkdir()
        os.environ["GITMEM_HOME"] = str(home)
        populated = populate(root / "store.git", args.size, bare=True, rng=random.Random(1))
        gitmem.open(populated.path).index().catch_up()
        memory_id = populated.ids[len(populated.ids) // 2]
        start = os.getloadavg()
        timings = measure(populated.path, memory_id, home, args.rounds)
        end = os.getloadavg()
    print(f"{args.size:,} memories, {args.rounds} rounds; load average {start[0]:.2f} "
          f"at the start, {end[0]:.2f} at the end ({os.cpu_count()} processors)")
    print(f"{'command':<28} {'wall ms':>8} {'x pass':>7} {'cpu ms':>7}  floor")
    for name, wall, ratio, cpu, met in report(timings):
        floor = "" if met is None else ("met" if met else "MISSED")
        print(f"{name:<28} {wall:>8.1f} {ratio:>7.2f} {cpu:>7.1f}  {floor}")


if __name__ == "__main__":
    main()
