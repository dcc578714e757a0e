"""Eight clones syncing through one hub at the same time: every sync succeeds, all converge.

Each clone is its own process (as agents on several machines are), writing and syncing in a
loop; pushes race, and the losers fetch, merge and retry with jittered exponential backoff.
``GITMEM_CONTENTION_OPS`` sets the operations per clone (issue 15's size is 50; CI runs 6).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import run_git

import gitmem

CLONES = 8
OPS = int(os.environ.get("GITMEM_CONTENTION_OPS", "6"))

WORKER = textwrap.dedent(
    """
    import json, random, sys
    import gitmem
    from gitmem.store import sync as S
    path, seed, ops = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    store = gitmem.open(path)
    rng = random.Random(seed)
    created, failures, attempts = [], [], []
    for n in range(ops):
        kind = rng.random()
        if kind < 0.5 or not created:
            created.append(store.create(f"clone {seed} fact {n}", agent=f"agent{seed}").id)
        elif kind < 0.8:
            store.append("notes/team/log", f"- clone {seed} entry {n}", agent=f"agent{seed}")
        else:
            store.update(rng.choice(created), f"clone {seed} fact revised {n}")
        try:
            attempts.append(store.sync().attempts)
        except Exception as exc:  # every failure is reported, not hidden
            failures.append(f"{type(exc).__name__}: {exc}")
    print(json.dumps({"created": created, "failures": failures, "attempts": attempts}))
    """
)


@pytest.mark.slow
def test_eight_clones_sync_in_parallel(tmp_path: Path) -> None:
    hub = gitmem.init(tmp_path / "hub.git", bare=True)
    hub.create("# Team log", id="notes/team/log", title="Team log")
    paths = []
    for n in range(CLONES):
        run_git(tmp_path, "clone", "-q", "--bare", str(tmp_path / "hub.git"), f"c{n}.git")
        paths.append(tmp_path / f"c{n}.git")
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(path), str(n), str(OPS)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n, path in enumerate(paths)
    ]
    reports = []
    for worker in workers:
        out, err = worker.communicate(timeout=600)
        assert worker.returncode == 0, err
        reports.append(json.loads(out.splitlines()[-1]))
    assert [r["failures"] for r in reports] == [[]] * CLONES
    stores = [gitmem.open(path) for path in paths]
    for store in stores + stores:
        store.sync()
    tips = {str(store.db().tip().id) for store in stores}  # type: ignore[union-attr]
    assert len(tips) == 1
    present = {m.id for m in stores[0].list(include_superseded=True)}
    for report in reports:
        assert set(report["created"]) <= present
    log = stores[0].read("notes/team/log").body
    entries = [line for line in log.splitlines() if line.startswith("- clone")]
    assert len(entries) == len(set(entries))
    assert not any(".fork-" in memory_id for memory_id in present)
