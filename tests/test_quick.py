"""The read commands' fast path: a current index read without libgit2 (gitmem.store.quick).

What matters: the fast path answers exactly what the full path answers (same bytes,
same errors), answers only when it can be sure, and never loads pygit2 or PyYAML when
it answers. git's own files are read in plain Python (gitmem.git.plain): those reads
are checked object by object against libgit2 on loose, packed and deltified objects.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pygit2
import pytest
from clitools import Gitmem, make_runner
from conftest import run_git

import gitmem
from gitmem import Store
from gitmem.base import paths
from gitmem.base.errors import AmbiguousIdError, InvalidIdError
from gitmem.git import plain
from gitmem.store.quick import open_quick

# -- git's files in plain Python ---------------------------------------------------------


def _objects(gitdir: Path) -> list[str]:
    out = run_git(gitdir, "rev-list", "--objects", "--all")
    return [line.split()[0] for line in out.splitlines() if line]


def _agrees_with_libgit2(gitdir: Path) -> int:
    repo = pygit2.Repository(str(gitdir))
    blobs = 0
    for oid in _objects(gitdir):
        obj = repo[oid]
        got = plain.blob(gitdir, oid)
        if obj.type == pygit2.enums.ObjectType.BLOB:
            assert got == obj.data, oid
            blobs += 1
        else:
            assert got is None, f"{oid} is a {obj.type_str}, not a blob"
    return blobs


def test_plain_reads_agree_with_libgit2_loose_packed_and_deltified(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    run_git(tmp_path, "init", "-q", str(repo))
    lines = [f"line {n} of a file that changes a little each commit" for n in range(300)]
    for i in range(30):
        lines[i * 7] = f"changed in commit {i}"
        (repo / "f.md").write_text("\n".join(lines) + "\n")
        (repo / f"small{i % 3}.md").write_bytes(bytes(range(256)) * (i + 1))
        run_git(repo, "add", "-A")
        run_git(repo, "commit", "-qm", f"c{i}")
    gitdir = repo / ".git"
    head = run_git(repo, "rev-parse", "HEAD").strip()
    assert plain.ref_target(gitdir, "refs/heads/main") == head
    assert plain.symbolic_head(gitdir) == "refs/heads/main"
    assert _agrees_with_libgit2(gitdir) > 30  # all loose
    run_git(repo, "gc", "-q", "--aggressive")  # packs, deltifies, packs the refs
    assert not (gitdir / "refs" / "heads" / "main").exists()
    packed = run_git(repo, "verify-pack", "-v", *map(str, gitdir.glob("objects/pack/*.idx")))
    assert any(len(line.split()) == 7 for line in packed.splitlines())  # deltas: base id column
    assert plain.ref_target(gitdir, "refs/heads/main") == head
    assert _agrees_with_libgit2(gitdir) > 30
    assert plain.ref_target(gitdir, "refs/heads/nope") is None
    assert plain.ref_target(gitdir, "refs/../HEAD") is None
    assert plain.blob(gitdir, "0" * 40) is None
    assert plain.blob(gitdir, "../../etc/passwd") is None


def _one_file_repo(root: Path) -> tuple[Path, str]:
    run_git(root.parent, "init", "-q", str(root))
    (root / "a.md").write_text("hello\n" * 50)
    run_git(root, "add", "-A")
    run_git(root, "commit", "-qm", "c")
    return root / ".git", run_git(root, "rev-parse", "HEAD:a.md").strip()


def test_plain_reads_of_damaged_objects_answer_none(tmp_path: Path) -> None:
    gitdir, blob = _one_file_repo(tmp_path / "loose")
    loose = gitdir / "objects" / blob[:2] / blob[2:]
    loose.chmod(0o644)
    loose.write_bytes(b"not zlib at all")
    assert plain.blob(gitdir, blob) is None

    gitdir, blob = _one_file_repo(tmp_path / "packed")
    run_git(gitdir.parent, "gc", "-q")
    pack = next(gitdir.glob("objects/pack/*.pack"))
    pack.chmod(0o644)
    data = pack.read_bytes()
    pack.write_bytes(data[:12] + bytes(len(data) - 12))  # no valid entry header, no zlib
    assert plain.blob(gitdir, blob) is None
    idx = next(gitdir.glob("objects/pack/*.idx"))
    idx.chmod(0o644)
    idx.write_bytes(b"\xfftOc\x00\x00\x00\x02" + b"\xff" * 100)  # cut short
    assert plain.blob(gitdir, blob) is None


# -- the fast path answers only when the index is current ---------------------------------


@pytest.fixture
def filled(bare_store: Store) -> Store:
    for n in range(12):
        bare_store.create(
            f"Memory number {n} about migration and deploys.\nSecond line {n}.",
            title=f"note {n}",
            category="notes" if n % 2 else None,
        )
    first = bare_store.list()[0]
    bare_store.supersede(first.id, "A newer take on migration.", title="newer")
    bare_store.index().catch_up()
    return bare_store


def test_current_index_is_served_and_a_moved_branch_is_not(filled: Store) -> None:
    quick = open_quick(filled.path, providers=['lexical'])
    assert quick is not None and str(quick.scope) == "repo"
    quick.close()
    # The branch moves with plain git (a new commit the index has not seen): not current.
    gitdir = filled.path
    tree = run_git(gitdir, "rev-parse", "main^{tree}").strip()
    commit = run_git(gitdir, "commit-tree", tree, "-p", "main", "-m", "by hand").strip()
    run_git(gitdir, "update-ref", "refs/heads/main", commit)
    assert open_quick(filled.path) is None
    filled.index().catch_up()
    assert open_quick(filled.path) is not None


def _set_meta(store: Store, key: str, value: str) -> None:
    db = paths.state_dir(store.db().gitdir) / paths.index_name("main")
    with sqlite3.connect(db) as conn:
        conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("schema", "4"),
        ("store", json.dumps({"format": 99, "scope": "repo"})),
        ("store", "{}"),
        ("store", "not json"),
        ("provider:lexical", "1 0000"),
    ],
)
def test_an_index_it_cannot_vouch_for_is_left_to_the_full_path(
    filled: Store, key: str, value: str
) -> None:
    _set_meta(filled, key, value)
    assert open_quick(filled.path, providers=['lexical']) is None


def test_unusual_layouts_are_left_to_the_full_path(filled: Store, tmp_path: Path) -> None:
    assert open_quick(tmp_path / "nowhere") is None
    (paths.state_dir(filled.db().gitdir) / paths.index_name("main")).rename(tmp_path / "x")
    assert open_quick(filled.path) is None  # no index
    (tmp_path / "x").rename(paths.state_dir(filled.db().gitdir) / paths.index_name("main"))
    assert open_quick(filled.path) is not None
    run_git(filled.path, "config", "core.worktree", str(tmp_path))
    assert open_quick(filled.path) is None


def test_a_fifo_where_a_ref_or_config_belongs_is_not_waited_on(filled: Store) -> None:
    import os

    gitdir = filled.path
    ref = gitdir / "refs" / "heads" / "main"
    tip = run_git(gitdir, "rev-parse", "main").strip()
    ref.unlink()
    os.mkfifo(ref)  # a copied store could hold one: reading it would block forever
    try:
        assert plain.ref_target(gitdir, "refs/heads/main") is None
        assert open_quick(filled.path) is None
    finally:
        ref.unlink()
        ref.write_text(tip + "\n")
    assert open_quick(filled.path) is not None


def test_a_work_tree_store_reads_the_branch_checked_out(store: Store) -> None:
    store.create("on main", title="main one")
    store.index().catch_up()
    quick = open_quick(store.path)
    assert quick is not None
    rows = quick.rows(["id", "title"], include_superseded=False, include_archived=False)
    assert [title for _id, title in rows] == ["main one"]


# -- the same answers as the full path ---------------------------------------------------


def _both(store: Store, *args: str, code: int = 0) -> tuple[str, str]:
    """(fast, full) stdout+stderr of one command; --branch main takes the full path."""
    gm = Gitmem(store.path, make_runner())
    fast = gm(*args, code=code)
    full = gm("--branch", "main", *args, code=code)
    return fast.stdout + fast.stderr, full.stdout + full.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("ls",),
        ("ls", "--all"),
        ("ls", "--scope", "repo"),
        ("search", "migration"),
        ("search", "migration", "--all", "-n", "3"),
        ("search", '"Second line" OR deploys'),
        ("search", "how do we migrate?"),  # not FTS5 syntax: recall, on the full path
        ("search", "zzzunknownword"),
        ("search", "migration", "--json"),
    ],
)
def test_fast_and_full_paths_print_the_same(filled: Store, args: tuple[str, ...]) -> None:
    fast, full = _both(filled, *args)
    assert fast == full
    assert fast.strip()


def test_show_by_id_and_prefix_prints_the_stored_bytes(filled: Store) -> None:
    memory = filled.list()[3]
    stored = filled.stored_file(memory.id)
    assert stored is not None
    for given in (memory.id, memory.id[:13], memory.id[:13] + "..."):
        fast, full = _both(filled, "show", given)
        assert fast == full == stored.decode()


def test_errors_are_the_full_paths(filled: Store) -> None:
    ids = [m.id for m in filled.list(include_superseded=True)]
    common = "mem_"
    assert sum(i.startswith(common) for i in ids) > 1
    fast, full = _both(filled, "show", common, code=_code(filled, common))
    assert fast == full and "matches" in fast
    fast, full = _both(filled, "show", "../etc", code=_code(filled, "../etc"))
    assert fast == full


def _code(store: Store, given: str) -> int:
    try:
        store.resolve_id(given)
    except (AmbiguousIdError, InvalidIdError) as exc:
        return exc.exit_code
    return 0


def test_a_deleted_memory_and_a_problem_file_fall_back(filled: Store) -> None:
    gone = filled.list()[5]
    filled.delete(gone.id)
    filled.index().catch_up()
    quick = open_quick(filled.path)
    assert quick is not None
    assert quick.resolve_id(gone.id[:14]) is None  # the full path looks in history
    fast, full = _both(filled, "show", gone.id[:14], code=3)
    assert fast == full


# -- recall ------------------------------------------------------------------------------


def test_recall_waits_for_pending_embeddings_then_answers_the_same(filled: Store) -> None:
    from gitmem.store.recall import recall_current

    quick = open_quick(filled.path, providers=["lexical", "vectors"])
    assert quick is not None
    # Nothing embedded yet: the full path embeds first, so the fast one leaves it to it.
    assert recall_current(quick, "how do we handle migration") is None
    quick.close()
    for args in (
        ("recall", "how do we handle migration?"),
        ("recall", "deploys", "--explain", "-n", "3"),
        ("recall", "second line", "--all", "--budget", "60"),
        ("recall", "what?"),  # no words to look for
        ("recall", "deploys", "--json"),
    ):
        fast, full = _both(filled, *args)
        assert fast == full, args
    quick = open_quick(filled.path, providers=["lexical", "vectors"])
    assert quick is not None
    answered = recall_current(quick, "how do we handle migration")
    assert answered is not None and answered.semantic
    assert answered.ids == filled.recall("how do we handle migration").ids


# -- and without loading libgit2 or PyYAML -----------------------------------------------

_PROBE = """
import sys
from gitmem.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
loaded = [m for m in ("pygit2", "yaml", "jsonschema", "numpy") if m in sys.modules]
sys.stderr.write("LOADED " + ",".join(loaded) + "\\n")
"""


def _loaded(store: Store, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, "--store", str(store.path), *args],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stderr.rsplit("LOADED ", 1)[1].strip()


def test_answered_reads_load_neither_libgit2_nor_pyyaml(filled: Store) -> None:
    memory = filled.list()[2]
    assert _loaded(filled, "ls") == ""
    assert _loaded(filled, "ls", "--all") == ""
    assert _loaded(filled, "show", memory.id[:12]) == ""
    assert _loaded(filled, "search", "migration") == ""
    _loaded(filled, "recall", "migration")  # the first embeds what is new, on the full path
    # the embedder (numpy) and the user's configuration that names it (YAML), never libgit2
    assert _loaded(filled, "recall", "migration", "--explain") == "yaml,numpy"
    # and where the fast path cannot answer, the full one does (and loads them)
    assert "pygit2" in _loaded(filled, "ls", "--json")


def test_gitmem_open_still_opens_after_the_fast_path(filled: Store) -> None:
    assert gitmem.open(filled.path).list()


def test_a_crafted_pack_whose_delta_is_its_own_base_answers_none(tmp_path: Path) -> None:
    """A ref delta naming itself as its base (a cycle no git writes) ends, in None."""
    import hashlib
    import struct
    import zlib

    gitdir = tmp_path / "r.git"
    run_git(tmp_path, "init", "-q", "--bare", str(gitdir))
    oid = hashlib.sha1(b"crafted").digest()
    delta = bytes([5, 5, 0x90, 5])  # sizes 5 -> 5, copy 5 bytes from offset 0
    header = bytes([0x70 | len(delta)])  # type 7 (ref delta), size < 16
    entry = header + oid + zlib.compress(delta)
    body = b"PACK" + struct.pack(">II", 2, 1) + entry
    pack = body + hashlib.sha1(body).digest()
    fanout = [0] * 256
    for i in range(oid[0], 256):
        fanout[i] = 1
    idx = (
        b"\xfftOc" + struct.pack(">I", 2) + struct.pack(">256I", *fanout)
        + oid + struct.pack(">I", zlib.crc32(entry)) + struct.pack(">I", 12)
        + pack[-20:]
    )
    idx += hashlib.sha1(idx).digest()
    (gitdir / "objects" / "pack" / "pack-crafted.pack").write_bytes(pack)
    (gitdir / "objects" / "pack" / "pack-crafted.idx").write_bytes(idx)
    assert plain.blob(gitdir, oid.hex()) is None
