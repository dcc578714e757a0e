"""Every read is bounded like a write: a file over the read bound in a store's history is
reported and skipped, never read, and stops no other memory from being read, indexed or
synced (docs/security.md, "Hostile store").

The bound is the body bound plus the front-matter bound (the user's own
``limits.max_body_bytes`` for the store moves it); its size is read from the object's
header before anything is inflated.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from storetools import memory_text, plant, run_git

import gitmem as gitmem_lib
from gitmem import Store
from gitmem.base.errors import TooLargeError
from gitmem.entry import hooks as gh
from gitmem.format.layout import memory_path

BIG_ID = "mem_0b000000-0000-4000-8000-00000000beef"
LINE = "x" * 79 + "\n"


def big_text(mib: float) -> str:
    return memory_text(BIG_ID, LINE * int(mib * 1024 * 1024 / len(LINE)))


def gitmem(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gitmem", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Traceback" not in result.stderr and "please report" not in result.stderr
    return result.stdout


def _hub_and_clone(store: Store, tmp_path: Path) -> tuple[Path, Path, str]:
    """A hub with one good memory, and a clone of it that wrote a memory of its own."""
    good = store.create("a good neighbour", title="neighbour").id
    hub = tmp_path / "hub.git"
    run_git(tmp_path, "init", "-q", "--bare", str(hub))
    run_git(store.path, "push", "-q", str(hub), "main")
    clone = tmp_path / "clone"
    ok(gitmem("clone", str(hub), str(clone), cwd=tmp_path))
    ok(gitmem("--store", str(clone), "add", "written here", "--title", "local", cwd=tmp_path))
    return hub, clone, good


@pytest.mark.slow
def test_a_pushed_oversized_file_bricks_no_clone(store: Store, tmp_path: Path) -> None:
    """Reproduction 1 of issue 38: a memory with a huge body, pushed to the hub, made every
    command in every clone read it whole (1 GiB: 37 s and 4.2 GB for sync, then ls, show,
    history, doctor and reindex each failed the same way)."""
    hub, clone, good = _hub_and_clone(store, tmp_path)
    plant(store, memory_path(BIG_ID), big_text(8), "a huge memory")
    run_git(store.path, "push", "-q", str(hub), "main")

    synced = gitmem("--store", str(clone), "sync", cwd=tmp_path)
    ok(synced)
    assert "over the read limit" in synced.stderr
    # Synced as the hub has it (the work tree too: git streamed it there).
    assert BIG_ID in run_git(clone, "ls-tree", "-r", "--name-only", "HEAD")
    assert (clone / memory_path(BIG_ID)).stat().st_size > 8 << 20

    listed = gitmem("--store", str(clone), "ls", "--json", cwd=tmp_path)
    ids = {m["id"] for m in json.loads(ok(listed))}
    assert good in ids and BIG_ID not in ids and len(ids) == 2
    assert memory_path(BIG_ID) in listed.stderr  # named, once
    assert "neighbour" in ok(gitmem("--store", str(clone), "show", good, cwd=tmp_path))
    assert good in ok(gitmem("--store", str(clone), "search", "neighbour", cwd=tmp_path))
    ok(gitmem("--store", str(clone), "history", good, cwd=tmp_path))
    ok(gitmem("--store", str(clone), "reindex", cwd=tmp_path))
    ok(gitmem("--store", str(clone), "diff", "HEAD~3", cwd=tmp_path))
    review = ok(gitmem("--store", str(clone), "review", "HEAD~3..HEAD", cwd=tmp_path))
    assert BIG_ID in review and "over the read limit" in review
    out = tmp_path / "exported"
    ok(gitmem("--store", str(clone), "export", "files", str(out), cwd=tmp_path))
    assert len(list(out.rglob("*.md"))) == 2

    shown = gitmem("--store", str(clone), "show", BIG_ID, cwd=tmp_path)
    assert shown.returncode == TooLargeError.exit_code and "over the read limit" in shown.stderr

    doctor = gitmem("--store", str(clone), "doctor", cwd=tmp_path)
    assert doctor.returncode != 0
    assert f"purge {BIG_ID} --apply" in doctor.stdout
    purged = gitmem("--store", str(clone), "purge", BIG_ID, "--apply", cwd=tmp_path)
    ok(purged)
    assert BIG_ID not in run_git(clone, "log", "main", "--name-only", "--format=")
    assert "over the read limit" not in ok(gitmem("--store", str(clone), "doctor", cwd=tmp_path))

    late = tmp_path / "late"  # cloned with the file already on the hub
    ok(gitmem("clone", str(hub), str(late), cwd=tmp_path))
    ids = {m["id"] for m in json.loads(ok(gitmem("--store", str(late), "ls", "--json",
                                                 cwd=tmp_path)))}
    assert good in ids and BIG_ID not in ids


def test_the_users_own_limit_moves_the_read_bound(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bound is the user's ``limits.max_body_bytes`` for the store plus the front-matter
    bound: lowered, a larger file is skipped by every reader and the rest read as before."""
    good = store.create("small and fine", title="fine").id
    plant(store, memory_path(BIG_ID), big_text(0.25), "a large memory")
    local = tmp_path / "mine.yaml"
    gitdir = str(store.db().gitdir.resolve())
    local.write_text(yaml.safe_dump({"stores": {gitdir: {"limits": {"max_body_bytes": 1000}}}}))
    monkeypatch.setenv("GITMEM_CONFIG", str(local))
    reopened = gitmem_lib.open(store.path)
    assert [m.id for m in reopened.list()] == [good]
    with pytest.raises(TooLargeError, match="over the read limit"):
        reopened.read(BIG_ID)
    assert reopened.read(good).body == "small and fine"
    assert len(reopened.history(good)) == 1


@pytest.mark.slow
def test_an_oversized_file_costs_no_memory(store: Store, tmp_path: Path) -> None:
    """A 256 MiB body in a synced clone: sync, ls, history and reindex stay at their usual
    size (before: sync 1.6 GB, history 1.1 GB, reindex 1.1 GB). (doctor's ``git status``
    hashes the work-tree file once: git's own mapping of it.)"""
    hub, clone, _ = _hub_and_clone(store, tmp_path)
    plant(store, memory_path(BIG_ID), big_text(256), "a huge memory")
    run_git(store.path, "push", "-q", str(hub), "main")
    # git's own fetch inflates a blob under core.bigFileThreshold (512 MiB) to hash it: its
    # memory, not gitmem's, so it runs first and sync then merges what it brought.
    run_git(clone, "fetch", "-q", "origin")
    measure = (
        "import resource, subprocess, sys;"
        "subprocess.run([sys.executable, '-m', 'gitmem', *sys.argv[1:]],"
        " stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL);"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    for args in (["sync"], ["ls"], ["history", BIG_ID], ["reindex"]):
        done = subprocess.run(
            [sys.executable, "-c", measure, "--store", str(clone), *args],
            capture_output=True, text=True, check=True, cwd=tmp_path,
        )
        assert int(done.stdout) < 200_000, (args, done.stdout)  # KiB


def test_the_hooks_refuse_an_oversized_file(store: Store, tmp_path: Path) -> None:
    """The hub's pre-receive hook took a 1 GiB memory (it packs to 4.8 MB); the hooks now
    refuse any file over the read bound, by its size, unread."""
    store.create("a fact", title="fact")
    hub = tmp_path / "hub.git"
    run_git(tmp_path, "clone", "-q", "--bare", str(store.path), str(hub))
    gh.install(hub, "server")
    work = tmp_path / "work"
    run_git(tmp_path, "clone", "-q", str(hub), str(work))
    gh.install(work, "memory")
    path = memory_path(BIG_ID)
    (work / path).parent.mkdir(parents=True, exist_ok=True)
    (work / path).write_text(big_text(2))
    run_git(work, "add", path)
    refused = subprocess.run(
        ["git", "commit", "-q", "-m", "huge"], cwd=work, capture_output=True, text=True
    )
    assert refused.returncode != 0 and "over the read limit" in refused.stderr
    before = run_git(hub, "rev-parse", "main")
    run_git(work, "commit", "-q", "--no-verify", "-m", "huge")
    pushed = subprocess.run(
        ["git", "push", "-q", "origin", "main"], cwd=work, capture_output=True, text=True
    )
    assert pushed.returncode != 0
    assert f"{path}: " in pushed.stderr and "over the read limit" in pushed.stderr
    assert run_git(hub, "rev-parse", "main") == before


def test_history_reads_one_page(store: Store, tmp_path: Path) -> None:
    """Reproduction 8 of issue 38: a memory with 100,000 versions made every ``history``
    read all of them (154 s and 505 MB here). A call reads the content of its page only:
    a version over the read bound before the page is not even looked at."""
    plant(store, memory_path(BIG_ID), big_text(2), "a huge first version")
    for n in range(5):
        plant(store, memory_path(BIG_ID), memory_text(BIG_ID, f"version {n + 2}\n"), f"v{n + 2}")
    newest = store.history(BIG_ID, limit=2)
    assert [v.version for v in newest] == [5, 6] and newest.earlier == 4
    assert [v.memory.body for v in newest if v.memory] == ["version 5\n", "version 6\n"]
    assert newest.warnings == []
    oldest = store.history(BIG_ID, limit=4, page=2)
    assert [v.version for v in oldest] == [None, 2] and oldest.earlier == 0
    assert any("over the read limit" in w for w in oldest.warnings)
    assert len(store.history(BIG_ID)) == 6

    cli = gitmem("--store", str(store.path), "history", BIG_ID, "--limit", "3", cwd=tmp_path)
    assert f"more: gitmem history {BIG_ID} --page 2" in ok(cli)
    paged = gitmem("--store", str(store.path), "--json", "history", BIG_ID, "-n", "3",
                   "--page", "2", cwd=tmp_path)
    data = json.loads(ok(paged))
    assert len(data["versions"]) == 3 and data["earlier"] == 0


@pytest.mark.slow
def test_log_reads_one_page(store: Store, tmp_path: Path) -> None:
    """``gitmem log`` walked and parsed every commit of the store before it printed one
    (100,000 commits: 35 s and 287 MB); a page now walks back only as far as it reaches,
    and says where the next one starts."""
    for n in range(6):
        store.create(f"fact {n}", title=f"fact {n}")
    every = store.log()
    assert store.log(limit=3) == every[:3]
    assert store.log(limit=0) == []
    first = gitmem("--store", str(store.path), "log", "-n", "3", "--format", "oneline",
                   cwd=tmp_path)
    assert ok(first).split()[0] == every[0].commit[:10]
    table = gitmem("--store", str(store.path), "log", "-n", "3", cwd=tmp_path)
    assert "--page 2" in table.stderr
    second = gitmem("--store", str(store.path), "--json", "log", "-n", "3", "--page", "2",
                    cwd=tmp_path)
    assert [e["commit"] for e in json.loads(ok(second))] == [e.commit for e in every[3:6]]
