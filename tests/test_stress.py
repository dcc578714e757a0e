"""Load: 8 writer processes with mixed operations, searching readers, and threads in one process.

Each writer creates, updates, appends to, supersedes and deletes its own
memories, writes two-memory transactions, and appends to one memory all of them
share; every acknowledged operation is journalled (the same workload and model
as tests/test_crash.py, without the kills). Readers search and list the whole
time and watch the branch tip. Afterwards: every acknowledged write is present
with its content, the branch never moved backwards, ``git fsck --strict`` is
clean, the index agrees with a scan of git, the work tree is clean.

Size: ``GITMEM_STRESS_OPS`` operations per writer (default 20, so CI stays
fast; the issue's full size is 500). docs/reliability.md has the full-size
command and the numbers it produced.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from storetools import run_git
from test_crash import Model, absorb, check_model, run_ops

import gitmem
from gitmem import Store
from gitmem.entry import doctor as D

OPS = int(os.environ.get("GITMEM_STRESS_OPS", "20"))
WRITERS = 8
READERS = 2
CTX = multiprocessing.get_context("forkserver")
SHARED = "notes/stress/shared"


def writer_main(path: str, journal: str, seed: int, count: int, start: Any) -> None:
    fd = os.open(journal, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def note(line: str) -> None:
        os.write(fd, (line + "\n").encode())

    store = gitmem.open(path)
    start.wait()
    run_ops(store, seed, [], note, count, shared=SHARED)
    os.close(fd)


def reader_main(path: str, stop: str, errors: str, start: Any) -> None:
    """Search and list until told to stop; any exception, or a tip that is not a descendant
    of the last one seen, goes to ``errors``."""
    store = gitmem.open(path)
    repo = store.db().repo
    start.wait()
    last = None
    reads = 0
    problems: list[str] = []
    while not Path(stop).exists():
        try:
            store.search("m")
            store.list()
            tip = store.db().tip()
            if tip is not None:
                if last is not None and tip.id != last and not repo.descendant_of(tip.id, last):
                    problems.append(f"branch moved backwards: {last} -> {tip.id}")
                last = tip.id
            reads += 1
        except Exception as exc:  # everything a reader meets is a failure to report
            problems.append(f"{type(exc).__name__}: {exc}")
    Path(errors).write_text("\n".join([f"reads {reads}", *problems]))


def verify(store: Store, model: Model) -> None:
    path = store.db().gitdir if store.db().bare else store.path
    scan = gitmem.open(path)
    scan.use_index = False
    memories = {m.id: m for m in scan.list(include_superseded=True, include_archived=True)}
    check_model(model, memories)
    assert scan.problems() == []
    indexed = {m.id: m.version for m in store.list(include_superseded=True, include_archived=True)}
    assert indexed == {i: m.version for i, m in memories.items()}
    fsck = run_git(store.db().gitdir, "fsck", "--strict", "--no-dangling", "--no-progress")
    assert fsck.strip() == ""
    if not store.db().bare:
        assert run_git(store.path, "status", "--porcelain", "--untracked-files=all") == ""
    report = D.diagnose(store, checks=["fsck", "locks", "leftovers", "worktree", "index", "schema"])
    assert report.healthy, [f.message for f in report.remaining]


def _journal_model(journals: list[Path], shared_markers: list[str]) -> Model:
    model = Model()
    model.state[SHARED] = list(shared_markers)
    for journal in journals:
        absorb(model, journal, {})
    return model


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["worktree", "bare"])
def test_eight_writer_processes_and_searching_readers(
    tmp_path: Path, kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / ("s.git" if kind == "bare" else "s")
    store = gitmem.init(path, bare=kind == "bare")
    store.create("shared\n", id=SHARED)
    start = CTX.Barrier(WRITERS + READERS)
    journals = [tmp_path / f"w{n}.journal" for n in range(WRITERS)]
    stop, began = tmp_path / "stop", time.monotonic()
    writers = [
        CTX.Process(target=writer_main, args=(str(path), str(j), 1000 + n, OPS, start))
        for n, j in enumerate(journals)
    ]
    readers = [
        CTX.Process(target=reader_main, args=(str(path), str(stop), str(tmp_path / f"r{n}"), start))
        for n in range(READERS)
    ]
    for proc in writers + readers:
        proc.start()
    for proc in writers:
        proc.join()
    stop.write_text("")
    for proc in readers:
        proc.join()
    elapsed = time.monotonic() - began
    assert [p.exitcode for p in writers + readers] == [0] * (WRITERS + READERS)
    reports = [(tmp_path / f"r{n}").read_text().splitlines() for n in range(READERS)]
    assert all(len(r) == 1 for r in reports), reports  # "reads N" and no problem lines
    model = _journal_model(journals, ["shared"])
    assert not [e for e in model.errors if not e.startswith(("AlreadyExists", "NotFound"))]
    verify(store, model)
    writes = model.acked
    with capsys.disabled():
        print(
            f"\n{kind}: {WRITERS} writers x {OPS} ops, {writes} acknowledged writes, "
            f"{sum(int(r[0].split()[1]) for r in reports)} reader passes, {elapsed:.1f} s"
        )


@pytest.mark.slow
def test_threads_sharing_one_store_object(store: Store) -> None:
    store.create("shared\n", id=SHARED)
    lines: list[str] = []
    lock = threading.Lock()

    def note(line: str) -> None:
        with lock:
            lines.append(line)

    threads = [
        threading.Thread(
            target=run_ops, args=(store, 2000 + n, [], note, OPS), kwargs={"shared": SHARED}
        )
        for n in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # One journal per thread, in the order each thread wrote it.
    by_thread: dict[str, list[str]] = {}
    for line in lines:
        parts = line.split(" ")
        if parts[0] in {"A", "B"}:
            seed = parts[3].split("x")[0]
            by_thread.setdefault(seed, []).append(line)
    journals = []
    for n, (seed, entries) in enumerate(sorted(by_thread.items())):
        journal = store.path.parent / f"t{n}-{seed}.journal"
        journal.write_text("\n".join(entries) + "\n")
        journals.append(journal)
    model = _journal_model(journals, ["shared"])
    assert model.acked > 0
    verify(store, model)
