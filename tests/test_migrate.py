"""Store formats and ``gitmem migrate`` (gitmem.features.migrate): only the current format is read;
an older store is refused everywhere but by ``gitmem migrate``, which converts it in one
commit per scope, safe against a kill. Old stores are written with git alone
(:func:`storetools.old_store`), as an older gitmem left them."""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import run_git
from storetools import assert_progress, old_store

import gitmem
from gitmem import Store
from gitmem.base.errors import DirtyWorktreeError, OldFormatError, UnsupportedFormatError
from gitmem.base.trailers import OP_TRAILER, CommitSpec, parse_trailers
from gitmem.features.graph import Graph
from gitmem.features.migrate import migrate
from gitmem.format.config import FORMAT
from gitmem.format.layout import format4_path, memory_path
from gitmem.git.objects import Snapshot
from gitmem.store.discovery import open_store
from tests.clitools import Gitmem, make_runner

CTX = multiprocessing.get_context("spawn")


def opened(path: Path) -> Store:
    return open_store(path, any_format=True)


def files(path: Path, rev: str = "HEAD") -> dict[str, str]:
    """Every file of ``rev`` and its text, read with git (one ``cat-file --batch``)."""
    names = [n for n in run_git(path, "ls-tree", "-r", "-z", "--name-only", rev).split("\0") if n]
    request = "".join(f"{rev}:{n}\n" for n in names).encode()
    batch = ["git", "-C", str(path), "cat-file", "--batch"]
    out = subprocess.run(batch, input=request, capture_output=True, check=True).stdout
    texts: dict[str, str] = {}
    for name in names:
        header, _, out = out.partition(b"\n")
        size = int(header.split()[2])
        texts[name], out = out[:size].decode(), out[size + 1 :]
    return texts


def check_converted(path: Path, made: dict[str, Any], before: dict[str, str]) -> None:
    """The store at ``path`` is the conversion of ``before``: every memory at its path, the
    same bytes but for the version/updated_at lines, and each memory reads as its history
    says, with the index, without it and rebuilt."""
    after = files(path)
    assert f"format: {FORMAT}\n" in after["gitmem.yaml"]
    for memory_id in made["ids"]:
        old = next(t for p, t in before.items() if p.endswith(f"/{memory_id}.md"))
        kept = [line for line in old.splitlines() if not line.startswith(("version:", "updated"))]
        assert after[memory_path(memory_id)].splitlines() == kept
    assert not any(
        "/" in p.removeprefix("memories/").split("/", 1)[1]
        for p in after
        if p.startswith("memories/")
    )
    stores = [gitmem.open(path), gitmem.open(path)]
    stores[1].use_index = False
    rebuilt = gitmem.open(path)
    rebuilt.reindex()
    for store in [*stores, rebuilt]:
        read = {m.id: (m.version, int(m.updated_at.timestamp())) for m in store.list()}
        expected = {i: (made["versions"][i], made["updated"][i]) for i in made["ids"]}
        assert {i: read[i] for i in made["ids"]} == expected
    first = made["ids"][0]
    steps = stores[0].history(first).versions
    assert [(s.op, s.version) for s in steps] == [
        ("create", 1), ("update", 2), ("update", 3), ("migrate", 3)
    ]  # fmt: skip


@pytest.mark.parametrize("fmt", [1, 2, 3, 4])
def test_an_old_store_is_refused_everywhere_but_by_migrate(tmp_path: Path, fmt: int) -> None:
    path = tmp_path / "s"
    old_store(path, fmt)
    with pytest.raises(OldFormatError, match=f"format {fmt} store; run `gitmem migrate`"):
        gitmem.open(path)
    gm = Gitmem(path, make_runner())
    for command in (("ls",), ("doctor",), ("status",), ("add", "x")):
        assert "run `gitmem migrate`" in gm.fails(OldFormatError.exit_code, *command)
    assert files(path)["gitmem.yaml"].count(f"format: {FORMAT}") == 0  # nothing changed


@pytest.mark.parametrize("bare", [False, True])
@pytest.mark.parametrize("fmt", [2, 4])
def test_migrate_converts_in_one_commit(tmp_path: Path, fmt: int, bare: bool) -> None:
    path = tmp_path / ("s.git" if bare else "s")
    made = old_store(path, fmt, bare=bare)
    before = files(path)
    head = run_git(path, "rev-parse", "HEAD").strip()
    (step,) = migrate(opened(path))
    assert (step.from_format, step.to_format, step.rewritten) == (fmt, FORMAT, 3)
    assert step.moved_count == (3 if fmt == 4 else 0)
    assert run_git(path, "rev-parse", "HEAD~1").strip() == head  # one commit
    message = run_git(path, "log", "-1", "--format=%B")
    assert (OP_TRAILER, "migrate") in parse_trailers(message)
    check_converted(path, made, before)
    assert migrate(opened(path)) == []  # a second run does nothing
    if not bare:
        assert run_git(path, "status", "--porcelain") == ""


def test_format_1_entities_move_into_their_shards(tmp_path: Path) -> None:
    made = old_store(tmp_path / "s", 1)
    (step,) = migrate(opened(tmp_path / "s"))
    assert step.moved == [
        ("entities/person/ada.md", f"entities/person/{_shard('Ada')}/ada.md")
    ]  # fmt: skip
    store = gitmem.open(tmp_path / "s")
    graph = Graph(store).read_graph().to_dict()
    assert graph["entities"] == [
        {"name": "Ada", "entityType": "person", "observations": ["wrote the first program"]}
    ]
    new_id = f"entities/person/{_shard('Ada')}/ada"
    assert store.read(new_id).supersedes == "entities/person/ada"
    first = next(s.memory_id for s in store.history(new_id).versions)
    assert first == "entities/person/ada"
    assert store.read(made["ids"][0]).version == 3


def _shard(name: str) -> str:
    from gitmem.features.graph_rows import shard_of

    return shard_of(name)


def test_dry_run_changes_nothing(tmp_path: Path) -> None:
    old_store(tmp_path / "s", 4)
    before = run_git(tmp_path / "s", "rev-parse", "HEAD")
    (step,) = migrate(opened(tmp_path / "s"), dry_run=True)
    assert step.moved_count == 3 and step.commit is None
    assert run_git(tmp_path / "s", "rev-parse", "HEAD") == before
    assert opened(tmp_path / "s").config().format == 4


def test_a_dirty_work_tree_is_refused_and_nothing_changes(tmp_path: Path) -> None:
    made = old_store(tmp_path / "s", 4)
    target = tmp_path / "s" / str(format4_path(made["ids"][1]))
    target.write_text(target.read_text() + "an edit not committed\n")
    head = run_git(tmp_path / "s", "rev-parse", "HEAD")
    with pytest.raises(DirtyWorktreeError):
        migrate(opened(tmp_path / "s"))
    assert run_git(tmp_path / "s", "rev-parse", "HEAD") == head
    assert target.read_text().endswith("an edit not committed\n")


def test_a_newer_store_is_refused_not_misread(any_store: Store) -> None:
    any_store.create("kept\n")
    _set_format(any_store, FORMAT + 1)
    path = _store_path(any_store)
    with pytest.raises(UnsupportedFormatError, match=f"format {FORMAT + 1} store") as refused:
        gitmem.open(path)
    assert "upgrade gitmem" in (refused.value.hint or "")
    with pytest.raises(UnsupportedFormatError):
        open_store(path, any_format=True)  # migrate never reads a newer store either
    out = Gitmem(path, make_runner()).fails(UnsupportedFormatError.exit_code, "ls")
    assert "upgrade gitmem" in out


def test_format_5_to_6_only_stamps_the_config(tmp_path: Path) -> None:
    """Format 6 added valid time: no format 5 file carries it, so migrate changes nothing
    but ``format:``, in one commit, and every memory reads as before."""
    store = gitmem.init(tmp_path / "s")
    kept = store.create("kept\n", title="k")
    _set_format(store, 5)
    with pytest.raises(OldFormatError, match="format 5 store; run `gitmem migrate`"):
        gitmem.open(tmp_path / "s")
    head = run_git(tmp_path / "s", "rev-parse", "HEAD").strip()
    (step,) = migrate(opened(tmp_path / "s"))
    assert (step.from_format, step.to_format, step.moved_count, step.rewritten) == (5, 6, 0, 0)
    changed = run_git(tmp_path / "s", "diff", "--name-only", head, "HEAD").split()
    assert changed == ["gitmem.yaml"] and migrate(opened(tmp_path / "s")) == []
    assert gitmem.open(tmp_path / "s").read(kept.id).version == 1


def test_a_format_5_gitmem_refuses_a_format_6_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A gitmem that does not know valid time refuses a store that may hold it, rather than
    show expired memories as current (FORMAT as a format 5 gitmem has it)."""
    store = gitmem.init(tmp_path / "s")
    store.create("expired\n", valid_until="2026-01-01")
    monkeypatch.setattr("gitmem.format.config.FORMAT", 5)
    with pytest.raises(UnsupportedFormatError, match="format 6 store; this gitmem reads format 5"):
        gitmem.open(tmp_path / "s")


def _store_path(store: Store) -> Path:
    db = store.db()
    return db.gitdir if db.bare else db.path


def _set_format(store: Store, version: int) -> None:
    def plan(snap: Snapshot) -> tuple[CommitSpec, None]:
        config = snap.read("gitmem.yaml")
        assert config is not None
        old = f"format: {FORMAT}".encode()
        snap.put("gitmem.yaml", config.replace(old, f"format: {version}".encode()))
        return CommitSpec("as another gitmem left it"), None

    store.db().write(plan)


def test_sync_and_update_branch_refuse_a_branch_of_an_old_format(tmp_path: Path) -> None:
    old_store(tmp_path / "hub.git", 4, bare=True)
    mine = gitmem.init(tmp_path / "mine")
    mine.create("local\n")
    Gitmem(tmp_path / "mine", make_runner())("remote", "add", "origin", str(tmp_path / "hub.git"))
    tip = mine.db().tip()
    with pytest.raises(OldFormatError) as refused:
        mine.sync()
    assert "gitmem" in (refused.value.hint or "") and "migrate" in (refused.value.hint or "")
    assert mine.db().tip() == tip


def test_a_hub_is_converted_in_a_clone_and_every_clone_follows(tmp_path: Path) -> None:
    """The recipe docs/format.md gives: clone (gitmem clone keeps a clone made by git and
    names the steps), migrate, push; a teammate with an unpushed write converts their
    clone too and syncs, and both edits meet without a fork."""
    from gitmem.entry.team import clone

    made = old_store(tmp_path / "hub.git", 4, bare=True)
    run_git(tmp_path, "clone", "-q", str(tmp_path / "hub.git"), "teammate")
    teammate_file = tmp_path / "teammate" / str(format4_path(made["ids"][1]))
    teammate_file.write_text(teammate_file.read_text() + "a teammate's line\n")
    run_git(tmp_path / "teammate", "commit", "-qam", "a hand edit, not pushed")
    with pytest.raises(OldFormatError) as refused:
        clone(str(tmp_path / "hub.git"), tmp_path / "mine")
    assert "migrate" in (refused.value.hint or "")
    migrate(opened(tmp_path / "mine"))
    run_git(tmp_path / "mine", "push", "-q", "origin", "main")
    with pytest.raises(OldFormatError):
        gitmem.open(tmp_path / "teammate")
    migrate(opened(tmp_path / "teammate"))
    teammate = gitmem.open(tmp_path / "teammate")
    result = teammate.sync()
    assert result.forks == [] and result.merge == "merge"
    memory = teammate.read(made["ids"][1])
    assert memory.body.endswith("a teammate's line\n") and memory.version == 2
    assert "version:" not in (tmp_path / "teammate" / memory_path(made["ids"][1])).read_text()


def test_cli_migrate(tmp_path: Path) -> None:
    old_store(tmp_path / "s", 4)
    gm = Gitmem(tmp_path / "s", make_runner())
    dry = gm("migrate", "--dry-run").stdout
    assert dry == f"repo: Would convert format 4 -> {FORMAT}: 3 file(s) moved, 3 rewritten\n"
    (step,) = gm.json("migrate")
    assert step["from_format"] == 4 and len(step["moved"]) == 3 and step["commit"]
    assert "Nothing to migrate" in gm("migrate").stdout
    assert len(gm.json("ls")) == 3


def test_migrate_reports_progress_over_the_files(tmp_path: Path) -> None:
    old_store(tmp_path / "s", 4, bulk=20)
    calls: list[tuple[int, int]] = []
    migrate(opened(tmp_path / "s"), progress=lambda done, total: calls.append((done, total)))
    assert_progress(calls)
    assert calls[-1] == (23, 23)


def _migrate_child(path: str, started: Any) -> None:
    store = opened(Path(path))
    started.set()
    migrate(store)


@pytest.mark.slow
def test_a_kill_during_migration_leaves_the_old_or_the_new_store(tmp_path: Path) -> None:
    """Kills land anywhere from a migration's first instant to a little past its end: the
    first round's migration runs unkilled and is timed, so the kills of the next four land
    inside the work however loaded the machine is."""
    rng = random.Random(7)
    bulk = 400
    took = 0.0
    for round_ in range(5):
        path = tmp_path / f"store{round_}"
        made = old_store(path, 4, bulk=bulk)
        before = files(path)
        started = CTX.Event()
        proc = CTX.Process(target=_migrate_child, args=(str(path), started))
        proc.start()
        assert started.wait(timeout=120)
        if round_ == 0:  # unkilled: how long a migration takes here
            began = time.perf_counter()
            proc.join()
            took = time.perf_counter() - began
        time.sleep(rng.uniform(0.0, 1.3 * took))
        if proc.is_alive():
            os.kill(proc.pid, signal.SIGKILL)
        proc.join()
        version = opened(path).config().format
        if version == 4:
            assert files(path) == before
        else:
            assert version == FORMAT
            check_converted(path, made, before)
        # Whatever the kill left, a run now finishes the job (a killed work-tree update is
        # healed as after any killed write).
        migrate(opened(path))
        check_converted(path, made, before)
        assert run_git(path, "fsck", "--strict", "--no-dangling") == ""


def test_json_of_a_migration(tmp_path: Path) -> None:
    old_store(tmp_path / "s", 3)
    (step,) = migrate(opened(tmp_path / "s"))
    data = json.loads(json.dumps(step.to_dict()))
    assert data["from_format"] == 3 and data["moved_count"] == 0 and data["rewritten"] == 3
