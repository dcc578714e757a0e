"""``gitmem serve``'s server time beside ``gitmem ls`` and ``gitmem history``, in one run.

    python -m bench.web                     # 10,000 memories; a memory with 100 versions

Pages are answered in-process (:meth:`gitmem.entry.web.server.App.answer`: the page read
from the store and rendered, no HTTP), medians of ``--rounds``. The server reads the listing
once at start (timed apart: no request waits for it unless it comes first); the memories page
is timed as it is, a later page, a filter, and right after a write (the view then reads only
the files that changed). The CLI commands run as processes. The floor: each page at most
200 ms.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from statistics import median

import gitmem
from bench.clibench import Timing
from bench.fixtures import build_history, populate
from bench.harness import cli_env

FLOOR_MS = 200.0


def timed(call: Callable[[], object], rounds: int) -> float:
    """Median milliseconds of ``call``."""
    runs = []
    for _ in range(rounds):
        start = time.perf_counter()
        call()
        runs.append(time.perf_counter() - start)
    return 1000 * median(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=10_000, help="memories in the store")
    parser.add_argument("--versions", type=int, default=100, help="versions of one memory")
    parser.add_argument("--rounds", type=int, default=11, help="runs of each timing")
    args = parser.parse_args()
    from gitmem.entry.web.server import App

    with tempfile.TemporaryDirectory(prefix="gitmem-webbench-") as tmp:
        root = Path(tmp)
        home = root / "home"
        home.mkdir()
        os.environ["GITMEM_HOME"] = str(home)
        print(f"importing {args.size:,} memories; writing a history of {args.versions} versions")
        big = populate(root / "big.git", args.size, bare=True, rng=random.Random(1)).path
        hist = build_history(root / "hist.git", 1_000, args.versions - 1, random.Random(2))
        for path in (big, hist.path):
            gitmem.open(path).index().catch_up()
        load = os.getloadavg()[0]
        pages: dict[str, float] = {}
        store = gitmem.open(big)
        app = App(store)
        start = time.perf_counter()
        app.view.refresh()  # what a server does at start, before anyone asks
        started = 1000 * (time.perf_counter() - start)
        pages[f"/ at {args.size:,}"] = timed(lambda: app.answer("/", {}, False), args.rounds)
        page = {"page": str(args.size // 100)}
        pages[f"/?page={page['page']}"] = timed(lambda: app.answer("/", page, False), args.rounds)
        tag = {"tag": "python"}
        pages["/?tag=python"] = timed(lambda: app.answer("/", tag, False), args.rounds)
        writes = []
        for n in range(args.rounds):  # each page after a write: the view reads what changed
            store.create(f"Written while serving {n}.", title=f"served {n}")
            start = time.perf_counter()
            app.answer("/", {}, False)
            writes.append(time.perf_counter() - start)
        pages["/ after a write"] = 1000 * median(writes)
        happ = App(gitmem.open(hist.path))
        one = f"/memory/{hist.tracked_id}"
        happ.answer(one, {}, False)
        pages[f"{one[:20]}... ({hist.versions} versions)"] = timed(
            lambda: happ.answer(one, {}, False), args.rounds
        )
        script = Path(sys.executable).parent / "gitmem"
        gm = [str(script)] if script.exists() else [sys.executable, "-m", "gitmem"]
        env = cli_env(home)
        commands = {
            f"gitmem ls ({args.size:,})": [*gm, "--store", str(big), "ls"],
            f"gitmem history ({hist.versions} versions)": [
                *gm, "--store", str(hist.path), "history", hist.tracked_id
            ],
        }  # fmt: skip
        processes = {}
        for name, command in commands.items():
            timing = Timing()
            timing.run(command, env)  # warm-up
            for _ in range(args.rounds):
                timing.run(command, env)
            processes[name] = timing.wall_ms()
    print(f"{args.rounds} rounds, load average {load:.2f} ({os.cpu_count()} processors)")
    print(f"{'listing read at start (not a request)':<44} {started:>8.1f} ms")
    for name, value in pages.items():
        print(f"{name:<44} {value:>8.1f} ms  {'met' if value <= FLOOR_MS else 'MISSED'}")
    for name, value in processes.items():
        print(f"{name:<44} {value:>8.1f} ms  (a process)")


if __name__ == "__main__":
    main()
