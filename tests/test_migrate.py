"""Store format versions and ``gitmem migrate`` (gitmem.features.migrate).

Stores are made in the format before (format 1, entity files unsharded) by moving what
the graph wrote back to the old places in a commit, the way an older gitmem left them;
everything is checked through git and through the graph's own reads.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import run_git

import gitmem
from gitmem import Store
from gitmem.base.errors import UnsupportedFormatError
from gitmem.base.trailers import OP_TRAILER, CommitSpec, parse_trailers
from gitmem.features.graph import Graph
from gitmem.features.migrate import MIGRATE_DEFAULT, migrate
from gitmem.format import codec, memfile
from gitmem.format.config import DEFAULT_FORMAT, FORMAT
from gitmem.git.objects import Snapshot
from tests.clitools import Gitmem, make_runner

CTX = multiprocessing.get_context("spawn")


def ent(name: str, kind: str = "person", *obs: str) -> dict[str, Any]:
    return {"name": name, "entityType": kind, "observations": list(obs)}


def graph_of(store: Store) -> dict[str, Any]:
    data = Graph(store).read_graph().to_dict()
    data["entities"] = sorted(data["entities"], key=lambda e: e["name"])
    data["relations"] = sorted(data["relations"], key=lambda r: (r["from"], r["to"]))
    return data


def make_format_1(store: Store, count: int = 6) -> dict[str, Any]:
    """A store as a format-1 gitmem left it: entity files at entities/<type>/<name>.md and
    ``format: 1``. Returns the graph it holds."""
    graph = Graph(store, agent="old")
    graph.create_entities([ent(f"person {i}", "person", f"fact {i}") for i in range(count)])
    graph.create_entities([ent("Acme", "company", "makes things")])
    graph.create_relations([{"from": "person 0", "to": "Acme", "relationType": "works_at"}])
    expected = graph_of(store)

    def plan(snap: Snapshot) -> tuple[CommitSpec, None]:
        for path in sorted(snap.iter_files("entities")):
            parts = path.split("/")
            if len(parts) != 4:
                continue
            old_id = "/".join([parts[0], parts[1], parts[3][: -len(".md")]])
            data = snap.read(path)
            assert data is not None
            memory = memfile.decode(data, path)
            doc = memory.document
            assert doc is not None
            metadata = dict(doc.metadata, id=old_id)
            snap.remove(path)
            text = codec.serialize(doc.with_changes(metadata, memory.body))
            snap.put(old_id + ".md", text.encode())
        config = snap.read("gitmem.yaml")
        assert config is not None
        snap.put("gitmem.yaml", config.replace(f"format: {DEFAULT_FORMAT}".encode(), b"format: 1"))
        return CommitSpec("as an older gitmem left it"), None

    store.db().integrate(plan)
    reopened = gitmem.open(store_path(store))
    assert reopened.config().format == 1
    assert graph_of(reopened) == expected  # format 1 is still read
    return expected


def store_path(store: Store) -> Path:
    db = store.db()
    return db.gitdir if db.bare else db.path


def entity_files(store: Store) -> list[str]:
    return sorted(store.db().snapshot().iter_files("entities"))


def test_new_stores_are_at_the_default_format(any_store: Store) -> None:
    assert any_store.config().format == DEFAULT_FORMAT
    assert migrate(any_store) == []


def test_migrate_moves_entities_into_shards_in_one_commit(any_store: Store) -> None:
    expected = make_format_1(any_store)
    store = gitmem.open(store_path(any_store))
    before = int(run_git(store.db().gitdir, "rev-list", "--count", "main"))
    (step,) = migrate(store)
    assert (step.from_format, step.to_format) == (1, 2)
    assert len(step.moved) == 7
    assert int(run_git(store.db().gitdir, "rev-list", "--count", "main")) == before + 1
    message = run_git(store.db().gitdir, "log", "-1", "--format=%B", "main")
    assert (OP_TRAILER, "migrate") in parse_trailers(message)
    assert all(len(p.split("/")) == 4 for p in entity_files(store) if "pending" not in p)
    reopened = gitmem.open(store_path(store))
    assert reopened.config().format == MIGRATE_DEFAULT
    assert graph_of(reopened) == expected
    # The history of a moved entity goes back through the move (supersedes).
    new_id = step.moved[0][1][: -len(".md")]
    old_id = step.moved[0][0][: -len(".md")]
    assert reopened.read(new_id).supersedes == old_id
    # The graph keeps working on the new layout; a second run finds nothing to do.
    Graph(reopened).create_entities([ent("after", "person")])
    assert migrate(reopened) == []
    assert run_git(store.db().gitdir, "fsck", "--strict", "--no-dangling") == ""


def test_dry_run_changes_nothing(store: Store) -> None:
    make_format_1(store)
    reopened = gitmem.open(store.path)
    files = entity_files(reopened)
    tip = reopened.db().tip()
    (step,) = migrate(reopened, dry_run=True)
    assert len(step.moved) == 7 and step.commit is None
    assert entity_files(reopened) == files and reopened.db().tip() == tip


def test_a_dirty_work_tree_is_refused_and_nothing_changes(store: Store) -> None:
    make_format_1(store)
    reopened = gitmem.open(store.path)
    old = next(p for p in entity_files(reopened) if p.startswith("entities/person/"))
    (store.path / old).write_text((store.path / old).read_text() + "an edit in progress\n")
    with pytest.raises(gitmem.DirtyWorktreeError):
        migrate(reopened)
    assert reopened.config().format == 1
    assert "an edit in progress" in (store.path / old).read_text()


def _set_format(store: Store, version: int) -> None:
    def plan(snap: Snapshot) -> tuple[CommitSpec, None]:
        config = snap.read("gitmem.yaml")
        assert config is not None
        newer = config.replace(f"format: {DEFAULT_FORMAT}".encode(), f"format: {version}".encode())
        snap.put("gitmem.yaml", newer)
        return CommitSpec("a newer gitmem wrote this"), None

    store.db().integrate(plan)


def test_a_newer_store_is_refused_not_misread(any_store: Store, tmp_path: Path) -> None:
    any_store.create("kept\n")
    _set_format(any_store, FORMAT + 1)
    with pytest.raises(UnsupportedFormatError, match=f"format {FORMAT + 1} store") as refused:
        gitmem.open(store_path(any_store))
    assert "upgrade gitmem" in (refused.value.hint or "")
    gm = Gitmem(store_path(any_store), make_runner())
    out = gm.fails(UnsupportedFormatError.exit_code, "ls")
    assert "upgrade gitmem" in out


def test_sync_refuses_a_remote_in_a_newer_format(tmp_path: Path) -> None:
    hub = gitmem.init(tmp_path / "hub.git", bare=True)
    hub.create("from the hub\n")
    run_git(tmp_path, "clone", "-q", str(tmp_path / "hub.git"), "clone")
    clone = gitmem.open(tmp_path / "clone")
    clone.create("local\n")
    _set_format(hub, FORMAT + 1)
    with pytest.raises(UnsupportedFormatError):  # this gitmem writes no newer store either
        hub.create("written by a newer gitmem\n")
    tip = clone.db().tip()
    with pytest.raises(UnsupportedFormatError):
        clone.sync()
    assert clone.db().tip() == tip
    assert clone.config().format == DEFAULT_FORMAT


def test_hub_refuses_a_push_in_a_newer_format(any_store: Store) -> None:
    """The same check in the hub's pre-receive hook: it cannot judge a newer format."""
    from gitmem.format.config import StoreConfig

    with pytest.raises(UnsupportedFormatError):
        StoreConfig.from_text(f"format: {FORMAT + 1}\nscope: repo\n").check_supported("x")
    with pytest.raises(gitmem.InvalidMemoryError, match="format must be a positive integer"):
        StoreConfig.from_text("format: two\n")


def test_cli_migrate(store: Store, tmp_path: Path) -> None:
    make_format_1(store)
    gm = Gitmem(store.path, make_runner())
    assert "Would move 7 file(s)" in gm("migrate", "--dry-run").stdout
    steps = gm.json("migrate")
    assert steps[0]["from_format"] == 1 and len(steps[0]["moved"]) == 7
    assert "Nothing to migrate" in gm("migrate").stdout


def _migrate_child(path: str) -> None:
    migrate(gitmem.open(path))


@pytest.mark.slow
def test_a_kill_during_migration_leaves_the_old_or_the_new_store(tmp_path: Path) -> None:
    rng = random.Random(7)
    for round_ in range(4):
        path = tmp_path / f"store{round_}"
        store = gitmem.init(path)
        expected = make_format_1(store, count=120)
        proc = CTX.Process(target=_migrate_child, args=(str(path),))
        proc.start()
        time.sleep(rng.uniform(0.2, 1.5))
        if proc.is_alive():
            os.kill(proc.pid, signal.SIGKILL)
        proc.join()
        reopened = gitmem.open(path)
        version = reopened.config().format
        files = entity_files(reopened)
        if version == 1:
            assert all(len(p.split("/")) == 3 for p in files)
        else:
            assert version == MIGRATE_DEFAULT and all(len(p.split("/")) == 4 for p in files)
        assert graph_of(reopened) == expected
        # Whatever the kill left, a run now finishes the job.
        migrate(reopened)
        final = gitmem.open(path)
        assert final.config().format == MIGRATE_DEFAULT and graph_of(final) == expected
        assert run_git(path, "fsck", "--strict", "--no-dangling") == ""


def test_migrate_reports_progress_over_the_files_it_moves(any_store: Store) -> None:
    from storetools import assert_progress

    make_format_1(any_store)
    store = gitmem.open(store_path(any_store))
    calls: list[tuple[int, int]] = []
    migrate(store, dry_run=True, progress=lambda done, total: calls.append((done, total)))
    assert_progress(calls)
    assert calls[0] == (0, 7) and calls[-1] == (7, 7)
    calls.clear()
    (step,) = migrate(store, progress=lambda done, total: calls.append((done, total)))
    assert len(step.moved) == 7
    assert_progress(calls)
    assert calls[-1] == (7, 7)
    calls.clear()
    assert migrate(store, progress=lambda done, total: calls.append((done, total))) == []
    assert calls == []  # nothing to migrate, nothing walked


def test_cli_migrate_on_a_terminal_prints_nothing_extra(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.clitools import pretend_terminal

    make_format_1(store)
    gm = Gitmem(store.path, make_runner())
    pretend_terminal(monkeypatch)
    dry = gm("migrate", "--dry-run")
    assert dry.stdout == "repo: format 1 -> 2: Would move 7 file(s)\n"
    assert dry.stderr == ""  # a bar only for steps with many files to look at
    quiet = gm("migrate", "--json")
    assert quiet.stderr == "" and json.loads(quiet.stdout)[0]["from_format"] == 1
