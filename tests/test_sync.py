"""gitmem sync through a bare remote and clones in temporary directories, with real git."""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path

import pygit2
import pytest
from clitools import Editor, Gitmem, make_runner
from conftest import run_git
from storetools import commit_count

import gitmem
from gitmem import ConflictError, DirtyWorktreeError, FixedClock, Store
from gitmem.features import conflicts as forks
from gitmem.format import codec
from gitmem.format.layout import id_from_path
from gitmem.format.memfile import file_text
from gitmem.git.objects import build_tree
from gitmem.git.trust import trust
from gitmem.store import branchmerge, mergedriver
from gitmem.store import merge as M
from gitmem.store import sync as S

MARKERS = ("<<<<<<<", ">>>>>>>", "\n=======\n")


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock("2026-11-22T10:00:00Z")


@pytest.fixture
def origin(tmp_path: Path, clock: FixedClock) -> Store:
    return gitmem.init(tmp_path / "origin.git", bare=True, clock=clock)


def clone(tmp_path: Path, name: str, clock: FixedClock, *, bare: bool = False) -> Store:
    args = ["clone", "-q", *(["--bare"] if bare else []), str(tmp_path / "origin.git"), name]
    run_git(tmp_path, *args)
    return gitmem.open(tmp_path / name, clock=clock)


def tip(store: Store) -> str:
    commit = store.db().tip()
    assert commit is not None
    return str(commit.id)


def memory_files(store: Store, rev: str = "main") -> dict[str, bytes]:
    repo = store.db().repo
    commit = repo.revparse_single(rev).peel(pygit2.Commit)
    out: dict[str, bytes] = {}

    def walk(tree: pygit2.Tree, prefix: str) -> None:
        for entry in tree:
            path = f"{prefix}{entry.name}"
            if entry.type_str == "tree":
                walk(repo[entry.id], path + "/")
            elif id_from_path(path) is not None:
                out[path] = repo[entry.id].data

    walk(commit.tree, "")
    return out


def assert_no_markers(store: Store) -> None:
    for path, data in memory_files(store).items():
        text = data.decode()
        assert not any(m in text for m in MARKERS), path


def assert_nothing_lost(store: Store, heads: list[dict[str, bytes]]) -> None:
    """Every memory version of every head is in the merged store's history: a step of
    ``history`` holds that very file (in format 2 its stored version is its version; in
    format 3 the version is derived, and history numbers its steps along its own walk)."""
    repo = store.db().repo
    for files in heads:
        for path, data in files.items():
            memory_id = id_from_path(path)
            assert memory_id is not None
            steps = [v for v in store.history(memory_id) if v.memory_id == memory_id]
            trees = [repo[v.commit].peel(pygit2.Commit).tree for v in steps]
            blobs = {tree[path].id for tree in trees if path in tree}
            assert pygit2.hash(data) in blobs, path
            doc = codec.parse(data.decode())
            assert doc.body in {v.memory.body for v in steps if v.memory is not None}, path


# -- the merge table, through sync -------------------------------------------------------------


def test_first_sync_pushes_to_an_empty_remote(tmp_path: Path, clock: FixedClock) -> None:
    run_git(tmp_path, "init", "-q", "--bare", "empty.git")
    store = gitmem.init(tmp_path / "local", clock=clock)
    memory = store.create("hello")
    S.add_remote(store.db(), "origin", str(tmp_path / "empty.git"))
    result = store.sync()  # the Store method is the library call behind gitmem sync
    assert result.pushed and result.fetched == 0 and result.merge == "none"
    run_git(tmp_path, "clone", "-q", str(tmp_path / "empty.git"), "other")
    assert gitmem.open(tmp_path / "other").read(memory.id).body == "hello"
    again = store.sync()
    assert not again.pushed and again.merge == "none"


def test_two_stores_made_apart_meet_through_one_remote(tmp_path: Path, clock: FixedClock) -> None:
    """gitmem init on two machines, one empty remote: unrelated histories merge."""
    run_git(tmp_path, "init", "-q", "--bare", "hub.git")
    one = gitmem.init(tmp_path / "one", clock=clock)
    clock.advance(seconds=5)
    two = gitmem.init(tmp_path / "two", clock=clock)
    first, second = one.create("from one"), two.create("from two")
    for store in (one, two):
        S.add_remote(store.db(), "hub", str(tmp_path / "hub.git"))
    one.sync("hub")
    result = two.sync("hub")
    assert result.merge == "merge" and result.added == [first.id]
    one.sync("hub")
    for store in (one, two):
        assert {first.id, second.id} <= {m.id for m in store.list()}
    assert tip(one) == tip(two)


def test_both_sides_add_and_change_memories(
    tmp_path: Path, origin: Store, clock: FixedClock
) -> None:
    shared = origin.create("one\ntwo\nthree\nfour\n", title="Shared", tags=["t"])
    a, b = clone(tmp_path, "a", clock), clone(tmp_path, "b", clock)
    only_a = a.create("from a")
    a.update(shared.id, "ONE\ntwo\nthree\nfour\n", tags=["t", "a"])
    clock.advance(seconds=10)
    only_b = b.create("from b")
    b.update(shared.id, "one\ntwo\nthree\nFOUR\n", title="Shared, by b")
    heads = [memory_files(a), memory_files(b)]
    first = a.sync()
    assert first.pushed and first.merge == "none"
    second = b.sync()
    assert second.merge == "merge" and second.pushed and second.fetched == 2
    assert second.added == [only_a.id] and second.changed == [shared.id]
    third = a.sync()
    assert third.merge == "fast-forward" and not third.pushed
    for store in (a, b):
        assert {only_a.id, only_b.id, shared.id} <= {m.id for m in store.list()}
        merged = store.read(shared.id)
        assert merged.body == "ONE\ntwo\nthree\nFOUR\n"
        assert merged.title == "Shared, by b" and merged.tags == ("t", "a")
        assert merged.version == 3
        assert run_git(store.path, "status", "--porcelain") == ""
        assert_no_markers(store)
    assert tip(a) == tip(b)
    assert_nothing_lost(b, heads)


def test_same_lines_fork(tmp_path: Path, origin: Store, clock: FixedClock) -> None:
    shared = origin.create("original\n", title="Shared")
    a, b = clone(tmp_path, "a", clock), clone(tmp_path, "b", clock)
    a.update(shared.id, "a's version\n")
    clock.advance(seconds=1)
    b.update(shared.id, "b's version\n")
    heads = [memory_files(a), memory_files(b)]
    b.sync()
    result = a.sync()
    [fork] = result.forks
    assert fork.of == shared.id
    assert a.read(shared.id).body == "b's version\n"  # the later write keeps the path
    kept = a.read(fork.id)
    assert kept.body == "a's version\n" and kept.extra[M.FORK_KEY] == shared.id
    message = run_git(a.path, "log", "-1", "--format=%B")
    assert f"Gitmem-Fork: {fork.id} of {shared.id}" in message
    assert "Gitmem-Op: merge" in message
    assert_no_markers(a)
    assert_nothing_lost(a, heads)
    b.sync()
    assert tip(a) == tip(b)


def test_delete_against_change(tmp_path: Path, origin: Store, clock: FixedClock) -> None:
    memory = origin.create("keep me\n")
    a, b = clone(tmp_path, "a", clock), clone(tmp_path, "b", clock)
    a.delete(memory.id)
    b.update(memory.id, "changed\n")
    a.sync()
    result = b.sync()
    assert result.kept_over_delete == [memory.id]
    assert b.read(memory.id).body == "changed\n"
    assert f"Gitmem-Kept-Over-Delete: {memory.id}" in run_git(b.path, "log", "-1", "--format=%B")


def test_both_supersede_one_memory(tmp_path: Path, origin: Store, clock: FixedClock) -> None:
    old = origin.create("old\n")
    a, b = clone(tmp_path, "a", clock), clone(tmp_path, "b", clock)
    new_a = a.supersede(old.id, "new by a\n")
    new_b = b.supersede(old.id, "new by b\n")
    a.sync()
    result = b.sync()
    assert result.forks == []
    assert {m.id for m in b.successors(old.id)} == {new_a.id, new_b.id}


def test_result_does_not_depend_on_who_merges_first(
    tmp_path: Path, origin: Store, clock: FixedClock
) -> None:
    names = [
        origin.create(f"memory {i}\nline2\nline3\nline4\n", title=f"m{i}").id for i in range(5)
    ]
    a, b = clone(tmp_path, "a", clock), clone(tmp_path, "b", clock)
    a.update(names[0], "memory 0 by a\nline2\nline3\nline4\n")
    b.update(names[0], "memory 0\nline2\nline3\nline4 by b\n", tags=["b"])
    a.update(names[1], "a wins here\n")
    clock.advance(seconds=3)
    b.update(names[1], "b wins here\n")
    a.delete(names[2])
    b.append(names[2], "more")
    a.supersede(names[3], "successor by a")
    b.supersede(names[3], "successor by b")
    a.create("only a")
    b.create("only b")
    run_git(a.path, "fetch", "-q", str(b.path), "main:refs/heads/other")
    repo = a.db().repo
    ours, theirs = repo.revparse_single("main"), repo.revparse_single("other")
    base = repo[repo.merge_base(ours.id, theirs.id)]
    one = branchmerge.merge_trees(repo, base, ours, theirs)
    two = branchmerge.merge_trees(repo, base, theirs, ours)
    assert build_tree(repo, ours.tree, one.changes) == build_tree(repo, theirs.tree, two.changes)
    assert [f.id for f in one.forks] == [f.id for f in two.forks] and len(one.forks) == 1


# -- failures and refusals ------------------------------------------------------------------------


def snapshot_state(store: Store) -> tuple[str, str, str, list[str]]:
    gitdir = store.db().gitdir
    refs = run_git(gitdir, "for-each-ref", "--format=%(refname) %(objectname)")
    files = sorted(
        str(p.relative_to(store.path)) for p in store.path.rglob("*") if ".git" not in p.parts
    )
    return tip(store), refs, run_git(store.path, "status", "--porcelain"), files


def test_network_failure_leaves_the_store_as_it_was(
    tmp_path: Path, origin: Store, clock: FixedClock
) -> None:
    a = clone(tmp_path, "a", clock)
    a.create("local work")
    before = snapshot_state(a)
    index_before = (a.db().gitdir / "index").read_bytes()
    shutil.rmtree(tmp_path / "origin.git")
    with pytest.raises(S.RemoteError, match="cannot fetch from origin"):
        a.sync()
    assert snapshot_state(a) == before
    assert (a.db().gitdir / "index").read_bytes() == index_before


def test_failure_messages_never_show_credentials(
    tmp_path: Path, origin: Store, clock: FixedClock
) -> None:
    a = clone(tmp_path, "a", clock)
    S.add_remote(a.db(), "private", "https://bob:" + "sekrit-token" + "@127.0.0.1:9/memory.git")
    with pytest.raises(S.RemoteError) as failure:
        a.sync("private")
    assert "sekrit" not in str(failure.value) and "cannot fetch from private" in str(failure.value)


def test_unknown_remote_is_refused(tmp_path: Path, origin: Store, clock: FixedClock) -> None:
    a = clone(tmp_path, "a", clock)
    with pytest.raises(gitmem.InvalidInputError, match="no remote 'nowhere'"):
        a.sync("nowhere")


def test_refuses_in_the_middle_of_a_merge(tmp_path: Path, origin: Store, clock: FixedClock) -> None:
    a, b = clone(tmp_path, "a", clock), clone(tmp_path, "b", clock)
    for store, line in ((a, "# a\n"), (b, "# b\n")):
        (store.path / "gitmem.yaml").write_text("format: 6\nscope: repo\n" + line)
        run_git(store.path, "commit", "-qam", "config")
    a.sync()
    run_git(b.path, "pull", "-q", "--no-rebase", "origin", "main", check=False)
    before = tip(b)
    with pytest.raises(ConflictError, match="middle of a git merge"):
        b.sync()
    assert tip(b) == before
    run_git(b.path, "merge", "--abort")
    run_git(b.path, "pull", "-q", "--rebase", "origin", "main", check=False)
    with pytest.raises(ConflictError, match="middle of a git rebase"):
        b.sync()


def test_a_non_memory_conflict_changes_nothing(
    tmp_path: Path, origin: Store, clock: FixedClock
) -> None:
    a, b = clone(tmp_path, "a", clock), clone(tmp_path, "b", clock)
    for store, line in ((a, "# a\n"), (b, "# b\n")):
        (store.path / "gitmem.yaml").write_text("format: 6\nscope: repo\n" + line)
        run_git(store.path, "commit", "-qam", "config")
    a.sync()
    before = tip(b)
    with pytest.raises(branchmerge.MergeConflictError, match=r"gitmem\.yaml"):
        b.sync()
    assert tip(b) == before
    assert run_git(b.path, "status", "--porcelain") == ""


def test_uncommitted_edits_in_the_way_are_refused(
    tmp_path: Path, origin: Store, clock: FixedClock
) -> None:
    memory = origin.create("one\n")
    a, b = clone(tmp_path, "a", clock), clone(tmp_path, "b", clock)
    a.update(memory.id, "two\n")
    a.sync()
    path = b.path / b.read(memory.id).path  # type: ignore[operator]
    path.write_text(path.read_text() + "hand edit\n")
    before = tip(b)
    with pytest.raises(DirtyWorktreeError):
        b.sync()
    assert tip(b) == before and path.read_text().endswith("hand edit\n")


def test_push_race_between_two_syncs(tmp_path: Path, origin: Store, clock: FixedClock) -> None:
    """b pushes while a's push is on its way (from a's pre-push hook): a merges again and wins."""
    a, b = clone(tmp_path, "a", clock), clone(tmp_path, "b", clock)
    from_a = a.create("from a")
    from_b = b.create("from b")
    hook = a.db().gitdir / "hooks" / "pre-push"
    flag = tmp_path / "raced"
    hook.write_text(
        "#!/bin/sh\nunset GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE\n"
        f"if [ ! -e '{flag}' ]; then touch '{flag}'; "
        f"git -C '{b.path}' push -q origin main || exit 1; fi\nexit 0\n"
    )
    hook.chmod(0o755)
    trust(a.path)  # a clone's hooks run only once its user trusts it (gitmem.git.command)
    result = a.sync()
    assert flag.exists()
    assert result.pushed and result.attempts == 2 and result.merge == "merge"
    b.sync()
    for store in (a, b):
        assert {from_a.id, from_b.id} <= {m.id for m in store.list()}
    assert tip(a) == tip(b) == str(origin.db().tip().id)  # type: ignore[union-attr]


def test_a_push_the_remote_refuses_is_an_error(
    tmp_path: Path, origin: Store, clock: FixedClock
) -> None:
    a = clone(tmp_path, "a", clock)
    a.create("x")
    hook = origin.db().gitdir / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'no pushes today' >&2\nexit 1\n")
    hook.chmod(0o755)
    with pytest.raises(S.RemoteError, match="refused the push"):
        a.sync()


def test_bare_clones_sync(tmp_path: Path, origin: Store, clock: FixedClock) -> None:
    shared = origin.create("a\nb\nc\nd\n")
    a = clone(tmp_path, "a.git", clock, bare=True)
    b = clone(tmp_path, "b", clock)
    a.update(shared.id, "A\nb\nc\nd\n")
    b.update(shared.id, "a\nb\nc\nD\n")
    a.sync()
    b.sync()
    a.sync()
    assert a.read(shared.id).body == b.read(shared.id).body == "A\nb\nc\nD\n"


def test_sync_registers_the_driver_and_reindexes(
    tmp_path: Path, origin: Store, clock: FixedClock
) -> None:
    a, b = clone(tmp_path, "a", clock), clone(tmp_path, "b", clock)
    assert not mergedriver.driver_registered(b.path)
    new = a.create("searchable walrus")
    a.sync()
    b.sync()
    assert mergedriver.driver_registered(b.path)
    assert b.index().meta().get("commit") == tip(b)
    assert [m.id for m in b.search("walrus")] == [new.id]


# -- the command line ----------------------------------------------------------------------------


def test_cli_remote_add_and_sync(tmp_path: Path, origin: Store, clock: FixedClock) -> None:
    run_git(tmp_path, "init", "-q", "--bare", "second.git")
    a = clone(tmp_path, "a", clock)
    cli = Gitmem(a.path, make_runner())
    cli("remote", "add", "second", str(tmp_path / "second.git"))
    assert "second" in cli("remote", "list").stdout
    error = cli.fails(4, "remote", "add", "second", "/elsewhere")
    assert "already exists" in error
    a.create("one")
    out = cli.json("sync", "second")
    assert out["pushed"] is True and out["remote"] == "second"
    text = cli("sync", "second").stdout
    assert text == "nothing new from second/main; nothing to push\n"
    a.create("two")
    assert cli("sync", "second").stdout == "nothing new from second/main; pushed\n"
    error = cli.fails(4, "sync", "nowhere")
    assert "gitmem remote add" in error


def test_cli_sync_reports_forks(tmp_path: Path, origin: Store, clock: FixedClock) -> None:
    shared = origin.create("x\n")
    a, b = clone(tmp_path, "a", clock), clone(tmp_path, "b", clock)
    a.update(shared.id, "a\n")
    b.update(shared.id, "b\n")
    a.sync()
    out = Gitmem(b.path, make_runner())("sync").stdout
    assert f"fork: {shared.id} was changed on both sides" in out


# -- convergence ---------------------------------------------------------------------------------


# GITMEM_CONVERGENCE_OPS=200 runs the full size (passed in 66 s here at 07:25 UTC on
# 2026-11-22, and in 95 s under heavier load); CI runs 30 per clone to keep the suite near
# its time budget.
OPS_PER_CLONE = int(os.environ.get("GITMEM_CONVERGENCE_OPS", "30"))
CLONES = 5


def _random_op(rng: random.Random, store: Store, clock: FixedClock) -> None:
    clock.advance(seconds=rng.randint(1, 30))
    memories = store.list(include_superseded=True)
    choice = rng.random()
    if not memories or choice < 0.3:
        store.create(f"note {rng.randint(0, 10**6)}\nline a\nline b\n", tags=[rng.choice("xyz")])
        return
    target = rng.choice(memories)
    if choice < 0.55:
        lines = target.body.splitlines(keepends=True) or ["\n"]
        lines[rng.randrange(len(lines))] = f"edit {rng.randint(0, 10**6)}\n"
        store.update(target.id, "".join(lines), tags=[*target.tags, rng.choice("abc")])
    elif choice < 0.75:
        store.append(target.id, f"## {clock.now().isoformat()} entry {rng.randint(0, 99)}\n")
    elif choice < 0.85:
        store.supersede(target.id, f"successor {rng.randint(0, 10**6)}\n")
    else:
        store.delete(target.id)


@pytest.mark.slow
def test_clones_converge(tmp_path: Path, origin: Store, clock: FixedClock) -> None:
    """5 clones x OPS_PER_CLONE random operations each (the issue asks for 200: CI runs 30 to
    keep the test near 20 s on a shared 2-core machine; set GITMEM_CONVERGENCE_OPS=200 for the
    full size), syncing in random order, converge."""
    rng = random.Random(20261122)
    origin.create("seed\n")
    clocks = [FixedClock("2026-11-22T10:00:00Z") for _ in range(CLONES)]
    clones = [clone(tmp_path, f"c{i}", clocks[i], bare=i == 0) for i in range(CLONES)]
    heads: list[dict[str, bytes]] = []
    for step in range(OPS_PER_CLONE):
        for i, store in enumerate(clones):
            _random_op(rng, store, clocks[i])
        if step % 10 == 9:
            order = list(range(CLONES))
            rng.shuffle(order)
            for i in order[:3]:
                heads.append(memory_files(clones[i]))
                clones[i].sync()
    for _ in range(2):  # twice round: the last one's merge reaches everyone
        for store in clones:
            heads.append(memory_files(store))
            store.sync()
    tips = {tip(store) for store in clones}
    assert len(tips) == 1
    final = memory_files(clones[0])
    assert any(".fork-" in path for path in final)  # the run did exercise overlapping edits
    for store in clones:
        assert memory_files(store) == final
        assert_no_markers(store)
        if not store.db().bare:
            assert run_git(store.path, "status", "--porcelain") == ""
        run_git(store.db().gitdir, "fsck", "--strict", "--no-progress")
        assert len(store.list(include_superseded=True, include_archived=True)) == len(final)
    # Every blob of every head recorded along the way is in the merged history ...
    objects = run_git(clones[1].path, "rev-list", "--objects", "main")
    reachable = {line.split()[0] for line in objects.splitlines()}
    for files in heads:
        assert {str(pygit2.hash(data)) for data in files.values()} <= reachable
    # ... and readable through history (a sample: history is the slow part).
    sample = rng.sample(heads[-CLONES:], 2)
    assert_nothing_lost(clones[1], sample)


# -- conflicts and resolve ----------------------------------------------------------------------


@pytest.fixture
def forked(tmp_path: Path, origin: Store, clock: FixedClock) -> tuple[Store, str, str]:
    """A clone with one fork: ``a``'s version at the path, ``b``'s version in the fork."""
    shared = origin.create("original\n", title="Shared", tags=["t"])
    a, b = clone(tmp_path, "a", clock), clone(tmp_path, "b", clock)
    b.update(shared.id, "b's version\n", tags=["t", "b"], extra={"source": "b"})
    clock.advance(seconds=1)
    a.update(shared.id, "a's version\n", title="Shared, by a")
    b.sync()
    [fork] = a.sync().forks
    return a, shared.id, fork.id


def test_conflicts_lists_forks(forked: tuple[Store, str, str]) -> None:
    store, of, fork = forked
    [conflict] = forks.conflicts(store)
    assert (conflict.fork.id, conflict.of) == (fork, of)
    assert conflict.kept is not None and conflict.kept.body == "a's version\n"
    assert conflict.fork.body == "b's version\n"


def test_resolve_keep_ours(forked: tuple[Store, str, str]) -> None:
    store, of, fork = forked
    before = commit_count(store)
    forks.resolve(store, of, "ours")
    assert store.get(fork) is None and store.read(of).body == "a's version\n"
    assert forks.conflicts(store) == [] and commit_count(store) == before + 1


def test_resolve_keep_theirs(forked: tuple[Store, str, str]) -> None:
    store, of, fork = forked
    forks.resolve(store, fork, "theirs", agent="reviewer")
    memory = store.read(of)
    assert memory.body == "b's version\n" and memory.tags == ("t", "b")
    assert memory.title == "Shared" and memory.extra == {"source": "b"}
    assert store.get(fork) is None and forks.conflicts(store) == []


def test_resolve_keep_both(forked: tuple[Store, str, str]) -> None:
    store, of, fork = forked
    forks.resolve(store, of, "both")
    assert M.FORK_KEY not in store.read(fork).extra
    assert store.read(of).body == "a's version\n" and forks.conflicts(store) == []


def test_resolve_by_edit(forked: tuple[Store, str, str]) -> None:
    store, of, fork = forked
    text = file_text(store.read(of)).replace("a's version\n", "both versions, merged\n")
    forks.resolve(store, of, "edit", text=text)
    assert store.read(of).body == "both versions, merged\n" and store.get(fork) is None


def test_resolve_refuses_what_is_not_a_fork(forked: tuple[Store, str, str]) -> None:
    store, _, _ = forked
    other = store.create("plain")
    with pytest.raises(gitmem.NotFoundError, match="no unresolved fork"):
        forks.resolve(store, other.id, "ours")
    with pytest.raises(gitmem.InvalidInputError):
        forks.resolve(store, other.id, "mine")


def test_cli_conflicts_and_resolve(
    forked: tuple[Store, str, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    store, of, fork = forked
    cli = Gitmem(store.path, make_runner())
    assert fork in cli("conflicts").stdout
    assert cli.json("conflicts")[0]["of"] == of
    cli.fails(2, "resolve", of)
    editor = Editor(tmp_path / "editor", monkeypatch)
    editor.will("import re\ntext = re.sub(r'<!-- gitmem resolve.*?-->\\n', '', text)\n")
    out = cli("resolve", of, "--edit").stdout
    assert "Resolved" in out
    assert "the other version" in editor.seen and "b's version" in editor.seen
    assert store.read(of).body == "a's version\nb's version\n"
    assert cli("conflicts").stdout.strip() == "No unresolved forks."


def test_resolve_takes_a_prefix_of_the_fork(forked: tuple[Store, str, str]) -> None:
    store, of, fork = forked
    cli = Gitmem(store.path, make_runner())
    assert cli("resolve", fork[:-3], "--keep", "theirs").stdout.startswith(f"Resolved {of}")
    assert store.read(of).body == "b's version\n" and store.get(fork) is None


def test_resolve_commit_is_one_resolve_by_who_ran_it(forked: tuple[Store, str, str]) -> None:
    store, of, fork = forked
    forks.resolve(store, fork, "theirs", message="b had the current deploy steps")
    commit = store.db().tip()
    assert commit is not None
    assert commit.message.splitlines()[0] == f"resolve: {of} keep theirs"
    assert "b had the current deploy steps" in commit.message
    trailers = dict(
        (k, v) for k, v in (line.split(": ", 1) for line in commit.message.splitlines()
                            if line.startswith("Gitmem-"))
    )
    assert [line for line in commit.message.splitlines() if line.startswith("Gitmem-Op")] == [
        "Gitmem-Op: resolve"
    ]
    assert "Gitmem-Agent" not in trailers
    assert commit.author.name == "Test User"  # the person resolving, not the memory's agent


@pytest.fixture
def superseded_twice(
    tmp_path: Path, origin: Store, clock: FixedClock
) -> tuple[Store, str, str, str]:
    """Two clones each superseded one memory; after syncing, it has two successors."""
    old = origin.create("deploy with make deploy", title="Deploy")
    a, b = clone(tmp_path, "a", clock), clone(tmp_path, "b", clock)
    theirs = b.supersede(old.id, "deploy with the release script", agent="b").id
    clock.advance(seconds=5)
    ours = a.supersede(old.id, "deploy with a tag push", agent="a").id
    b.sync()
    a.sync()
    return a, old.id, ours, theirs


def test_conflicts_lists_double_supersedes(
    superseded_twice: tuple[Store, str, str, str],
) -> None:
    store, old, ours, theirs = superseded_twice
    [conflict] = forks.conflicts(store)
    assert conflict.kind == "supersede" and conflict.of == old
    assert conflict.kept is not None
    assert {conflict.kept.id, conflict.fork.id} == {ours, theirs}
    assert conflict.kept.id == store.latest_version(old).id
    cli = Gitmem(store.path, make_runner())
    assert "supersede" in cli("conflicts").stdout


@pytest.mark.parametrize("keep", ["ours", "theirs", "both", "edit"])
def test_resolve_double_supersede(
    superseded_twice: tuple[Store, str, str, str], keep: str
) -> None:
    store, old, _, _ = superseded_twice
    [conflict] = forks.conflicts(store)
    assert conflict.kept is not None
    kept, other = conflict.kept.id, conflict.fork.id
    text = None
    if keep == "edit":
        text = file_text(store.read(kept)).replace("deploy with", "deploy, agreed, with")
    forks.resolve(store, old, keep, text=text)
    assert forks.conflicts(store) == []
    latest = store.latest_version(old).id
    if keep == "theirs":
        assert latest == other and store.get(kept) is None
    elif keep == "both":
        assert store.read(kept).supersedes == other and store.get(other) is not None
        assert latest == kept
        assert [v.memory.id for v in store.history(kept) if v.memory][:1] == [old]
    else:
        assert latest == kept and store.get(other) is None
    if keep == "edit":
        assert "agreed" in store.read(kept).body


@pytest.fixture
def decided(tmp_path: Path, origin: Store, clock: FixedClock) -> tuple[Store, Store, str]:
    """Both clones retitle one memory (and edit different lines): the later title wins."""
    shared = origin.create("line one\nline two\nline three\n", title="Deploy", category="ops")
    a, b = clone(tmp_path, "a", clock), clone(tmp_path, "b", clock)
    b.update(shared.id, "line one, b\nline two\nline three\n", title="Deploying (b)")
    clock.advance(seconds=5)
    a.update(shared.id, "line one\nline two\nline three, a\n", title="Deploying (a)")
    b.sync()
    result = a.sync()
    assert result.decided == [(shared.id, "title")] and result.forks == []
    return a, b, shared.id


def test_a_field_decided_by_time_is_reported_and_listed(
    decided: tuple[Store, Store, str],
) -> None:
    a, b, memory_id = decided
    merged = a.read(memory_id)
    assert merged.title == "Deploying (a)"
    assert merged.body == "line one, b\nline two\nline three, a\n"
    assert merged.extra[M.DECIDED_KEY] == {"title": "Deploying (b)"}
    commit = a.db().tip()
    assert commit is not None and f"Gitmem-Decided: {memory_id} title" in commit.message
    b.sync()  # the other clone sees the same listing
    for store in (a, b):
        [conflict] = forks.conflicts(store)
        assert conflict.kind == "decided" and conflict.of == memory_id
    cli = Gitmem(a.path, make_runner())
    assert "decided" in cli("conflicts").stdout
    b.create("unrelated")
    sync_out = cli.json("sync")
    assert sync_out["decided"] == []


@pytest.mark.parametrize("keep", ["ours", "theirs"])
def test_resolve_a_decided_field(decided: tuple[Store, Store, str], keep: str) -> None:
    a, _, memory_id = decided
    forks.resolve(a, memory_id, keep)
    memory = a.read(memory_id)
    assert M.DECIDED_KEY not in memory.extra and forks.conflicts(a) == []
    assert memory.title == ("Deploying (a)" if keep == "ours" else "Deploying (b)")
    assert memory.body == "line one, b\nline two\nline three, a\n"
    with pytest.raises(gitmem.NotFoundError):
        forks.resolve(a, memory_id, keep)


# -- progress ---------------------------------------------------------------------------------


FAKE_TOKEN = "ghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"


def test_sync_reports_the_index_catch_up_over_the_commits_it_brought(
    tmp_path: Path, origin: Store, clock: FixedClock
) -> None:
    from storetools import assert_progress

    a, b = clone(tmp_path, "a", clock), clone(tmp_path, "b", clock)
    a.create("first")
    a.sync()
    b.sync()
    for n in range(25):
        a.create(f"memory {n}")
    a.sync()
    b.list()  # b's index is at its tip before the sync
    calls: list[tuple[int, int]] = []
    result = b.sync(progress=lambda done, total: calls.append((done, total)))
    assert result.merge == "fast-forward" and result.fetched == 25
    assert_progress(calls)
    assert calls[-1] == (25, 25)  # one step per commit the fast-forward brought
    # Nothing new: no catch-up, no progress.
    calls.clear()
    b.sync(progress=lambda done, total: calls.append((done, total)))
    assert calls == []


def test_sync_passes_gits_own_progress_on_redacted(
    tmp_path: Path, origin: Store, clock: FixedClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GIT_PROGRESS_DELAY", "0")  # git shows progress at once, not after 2 s
    a, b = clone(tmp_path, "a", clock), clone(tmp_path, "b", clock)
    hook = origin.db().gitdir / "hooks" / "post-receive"
    hook.write_text(f"#!/bin/sh\necho 'mirrored to https://bot:{FAKE_TOKEN}@example.com/m' >&2\n")
    hook.chmod(0o755)
    trust(a.path)  # the hub's hook runs for a trusted clone only (gitmem.git.command)
    for n in range(20):
        a.create(f"memory {n}")
    pushed: list[str] = []
    assert a.sync(git_progress=pushed.append).pushed
    text = "".join(pushed)
    assert "Writing objects: 100%" in text
    assert all(line.endswith(("\r", "\n")) for line in pushed)
    assert "\r" in text  # progress lines redraw themselves, as git draws them
    assert "remote: mirrored to https://***@example.com/m" in text
    assert FAKE_TOKEN not in text and "bot:" not in text
    fetched: list[str] = []
    assert b.sync(git_progress=fetched.append).merge == "fast-forward"
    assert "objects" in "".join(fetched)
    # Without the callback git is asked for no progress, and the sync is the same.
    a.create("one more")
    assert a.sync().pushed


def test_redact_remote_masks_what_a_url_carries() -> None:
    from gitmem.base.redact import redact_remote

    assert redact_remote("to https://me:s3cret@host/x") == "to https://***@host/x"
    assert redact_remote(f"https://{FAKE_TOKEN}@github.com/x") == "https://***@github.com/x"
    assert FAKE_TOKEN not in redact_remote(f"token {FAKE_TOKEN}\r")
    assert redact_remote("Receiving objects:  50% (1/2)\r") == "Receiving objects:  50% (1/2)\r"


def test_cli_sync_shows_gits_progress_on_a_terminal_only(
    tmp_path: Path, origin: Store, clock: FixedClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    from clitools import pretend_terminal

    monkeypatch.setenv("GIT_PROGRESS_DELAY", "0")
    a, b = clone(tmp_path, "a", clock), clone(tmp_path, "b", clock)
    for n in range(20):
        a.create(f"memory {n}")
    runner = make_runner()
    plain = Gitmem(a.path, runner)("sync")
    assert plain.stderr == ""  # not a terminal: git is not even asked for progress
    a.create("one more")
    pretend_terminal(monkeypatch)
    shown = Gitmem(a.path, runner)("sync")
    assert "Writing objects: 100%" in shown.stderr
    assert shown.stdout == "nothing new from origin/main; pushed\n"  # the summary alone
    quiet = Gitmem(b.path, runner)("sync", "--json")
    assert quiet.stderr == ""
    data = json.loads(quiet.stdout)
    assert data["merge"] == "fast-forward" and data["fetched"] == 21
