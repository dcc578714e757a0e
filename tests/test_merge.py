"""The memory-aware merge: pure functions, and the git merge driver inside real `git merge`."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_git
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from storetools import memory_text

import gitmem
from gitmem import FixedClock, Store
from gitmem.format import codec
from gitmem.git.db import operation_in_progress
from gitmem.store import merge as M
from gitmem.store import mergedriver
from gitmem.store import sync as S
from gitmem.store.memory_versions import Versions

MID = "mem_0a000000-0000-4000-8000-000000000001"
PATH = f"memories/0a/{MID}.md"
MARKERS = ("<<<<<<<", ">>>>>>>", "\n=======\n")


def doc(body: str, *, extra: str = "") -> bytes:
    return memory_text(MID, body, extra=extra).encode()


def later(ours: str, theirs: str, versions: tuple[int, int] = (2, 2)) -> M.DerivedSides:
    """Each side's versions as of its commit, the newest made at these times of day."""

    def at(hour: str) -> int:
        return int(dt.datetime.fromisoformat(f"2026-11-22T{hour}+00:00").timestamp())

    return M.DerivedSides(Versions(versions[0], at(ours)), Versions(versions[1], at(theirs)))


def parsed(data: bytes | None) -> codec.Document:
    assert data is not None
    return codec.parse(data.decode())


def no_markers(data: bytes | None) -> None:
    assert data is not None
    assert not any(marker in data.decode() for marker in MARKERS)


# -- lines ------------------------------------------------------------------------------------


def test_disjoint_line_edits_merge() -> None:
    base = "a\nb\nc\nd\ne\n"
    assert M.merge_text(base, "A\nb\nc\nd\ne\n", "a\nb\nc\nd\nE\n") == "A\nb\nc\nd\nE\n"


def test_overlapping_edits_do_not_merge() -> None:
    assert M.merge_text("a\nb\nc\n", "a\nX\nc\n", "a\nY\nc\n") is None


def test_the_same_change_on_both_sides_is_taken_once() -> None:
    assert M.merge_text("a\nb\n", "a\nX\n", "a\nX\n") == "a\nX\n"
    assert M.merge_lines(["a\n", "b\n"], ["a\n", "X\n", "b\n"], ["a\n", "X\n", "b\n"]) == [
        "a\n",
        "X\n",
        "b\n",
    ]


def test_insert_and_delete_elsewhere() -> None:
    base = "one\ntwo\nthree\nfour\n"
    ours = "zero\none\ntwo\nthree\nfour\n"
    theirs = "one\ntwo\nfour\n"
    assert M.merge_text(base, ours, theirs) == "zero\none\ntwo\nfour\n"
    assert M.merge_text(base, theirs, ours) == "zero\none\ntwo\nfour\n"


# -- appended sections ------------------------------------------------------------------------


def test_appended_sections_are_kept_in_date_order() -> None:
    base = "# Review history\n\n## 2026-11-20 first\nok\n"
    ours = base + "## 2026-11-23 late\nfrom ours\n"
    theirs = base + "## 2026-11-21 early\nfrom theirs\n## 2026-11-24 last\nmore\n"
    merged = M.merge_appended(base, ours, theirs, ("2026-11-23", "2026-11-24"))
    assert merged == (
        base + "## 2026-11-21 early\nfrom theirs\n## 2026-11-23 late\nfrom ours\n"
        "## 2026-11-24 last\nmore\n"
    )


def test_a_section_both_sides_appended_is_kept_once() -> None:
    base = "log\n"
    same = "## 2026-11-22 run\npassed\n"
    merged = M.merge_appended(base, base + same, base + same + "## 2026-11-23 x\ny\n", ("a", "b"))
    assert merged == base + same + "## 2026-11-23 x\ny\n"


def test_edits_that_are_not_appends_are_not_section_merged() -> None:
    assert M.merge_appended("a\n", "b\nmore\n", "a\nmore\n", ("x", "y")) is None


def test_append_to_a_body_without_final_newline() -> None:
    base = "head"
    merged = M.merge_appended(
        base, base + "\n## 2026-11-23 b\n", base + "\n## 2026-11-22 a\n", ("", "")
    )
    assert merged == "head\n## 2026-11-22 a\n## 2026-11-23 b\n"


# -- front-matter -------------------------------------------------------------------------------


def test_front_matter_merges_field_by_field() -> None:
    base = {"id": MID, "title": "T", "tags": ["a", "b"], "version": 2, "category": "c"}
    newer = {"id": MID, "title": "T2", "tags": ["a", "b", "new1"], "version": 4, "category": "c"}
    earlier = {"id": MID, "title": "T", "tags": ["b", "new2"], "version": 3, "category": "moved"}
    out = M.merge_metadata(base, newer, earlier)
    assert out["title"] == "T2"  # changed on the later side only
    assert out["category"] == "moved"  # changed on the earlier side only: still taken
    assert out["tags"] == ["b", "new1", "new2"]  # union of additions; "a" removed by one side
    assert "version" not in out  # derived from history, never merged into a file


def test_a_scalar_changed_on_both_sides_comes_from_the_later_side() -> None:
    out = M.merge_metadata({"title": "base"}, {"title": "later"}, {"title": "earlier"})
    assert out["title"] == "later"


def test_a_key_removed_on_one_side_goes() -> None:
    out = M.merge_metadata({"k": 1, "j": 2}, {"k": 1, "j": 2}, {"j": 2})
    assert "k" not in out


# -- one memory ------------------------------------------------------------------------------------


def test_both_change_different_lines() -> None:
    base = doc("one\ntwo\nthree\nfour\n")
    ours = doc("ONE\ntwo\nthree\nfour\n", extra="tags: [x]\n")
    theirs = doc("one\ntwo\nthree\nFOUR\n", extra="tags: [y]\n")
    result = M.merge_file(PATH, base, ours, theirs, derived=later("10:00:00", "11:00:00"))
    assert result.forks == () and result.conflict is None
    merged = parsed(result.data)
    assert merged.body == "ONE\ntwo\nthree\nFOUR\n"
    assert "version" not in merged.metadata and "updated_at" not in merged.metadata
    assert merged.metadata["tags"] == ["y", "x"]  # the later side's first
    swapped = later("11:00:00", "10:00:00")
    assert M.merge_file(PATH, base, theirs, ours, derived=swapped).data == result.data


def test_both_change_the_same_lines_makes_a_fork() -> None:
    base = doc("shared\n", extra="supersedes: mem_0b000000-0000-4000-8000-000000000009\n")
    ours = doc("ours\n", extra="supersedes: mem_0b000000-0000-4000-8000-000000000009\n")
    theirs = doc("theirs\n", extra="supersedes: mem_0b000000-0000-4000-8000-000000000009\n")
    result = M.merge_file(PATH, base, ours, theirs, derived=later("10:00:00", "11:00:00"))
    no_markers(result.data)
    assert parsed(result.data).body == "theirs\n"  # the later side keeps the path
    [fork] = result.forks
    no_markers(fork.data)
    fork_doc = parsed(fork.data)
    assert fork_doc.body == "ours\n"
    assert fork_doc.metadata["id"] == fork.id == M.fork_id(MID, ours)
    assert fork_doc.metadata[M.FORK_KEY] == MID
    assert fork_doc.metadata["supersedes"] == "mem_0b000000-0000-4000-8000-000000000009"
    assert fork.path == gitmem.format.layout.memory_path(fork.id)
    other = M.merge_file(PATH, base, theirs, ours, derived=later("11:00:00", "10:00:00"))
    assert other.data == result.data and other.forks == result.forks


def test_delete_against_change_keeps_the_change() -> None:
    base, changed = doc("x\n"), doc("y\n")
    for ours, theirs in ((None, changed), (changed, None)):
        result = M.merge_file(PATH, base, ours, theirs)
        assert result.data == changed and result.kept_over_delete


def test_delete_against_nothing_deletes() -> None:
    base = doc("x\n")
    assert M.merge_file(PATH, base, None, base).data is None


def test_add_add_with_different_bodies_forks() -> None:
    ours, theirs = doc("a\n"), doc("b\n")
    result = M.merge_file(PATH, None, ours, theirs, derived=later("09:00:00", "09:30:00", (1, 1)))
    assert parsed(result.data).body == "b\n"
    assert [parsed(f.data).body for f in result.forks] == ["a\n"]


def test_unreadable_side_is_a_conflict_not_markers() -> None:
    base = doc("x\n")
    result = M.merge_file(PATH, base, b"---\nid: [broken\n---\nbody\n", doc("y\n"))
    assert result.conflict is not None
    no_markers(result.data)


def test_other_files_merge_as_text_or_report_a_conflict() -> None:
    ok = M.merge_file("gitmem.yaml", b"a\nb\nc\n", b"A\nb\nc\n", b"a\nb\nC\n")
    assert ok.data == b"A\nb\nC\n" and ok.conflict is None
    bad = M.merge_file("gitmem.yaml", b"a\n", b"b\n", b"c\n")
    assert bad.conflict is not None


@pytest.mark.parametrize(
    "long_id",
    ["mem_" + "a" * 196, "mem_" + "a" * 184 + "." * 12, "notes/" + "b" * 182 + "/c" + "d" * 10],
)
def test_fork_ids_stay_valid_within_the_id_limit(long_id: str) -> None:
    fork = M.fork_id(long_id, b"data")
    assert len(fork) <= gitmem.format.layout.MAX_ID_LENGTH
    gitmem.format.layout.check_id(fork)


# -- with a store: appended documents -----------------------------------------------------------


def test_appended_documents_through_a_merge(tmp_path: Path) -> None:
    clock = FixedClock("2026-11-22T10:00:00Z")
    origin = gitmem.init(tmp_path / "origin.git", bare=True, clock=clock)
    doc_id = "projects/demo/review_history"
    origin.create("# Review history\n", id=doc_id, title="Reviews")
    a, b = clone(tmp_path, "a", clock), clone(tmp_path, "b", clock)
    clock.advance(hours=1)
    a.append(doc_id, "## 2026-11-22T11:00:00Z review by a\nfine\n")
    clock.advance(hours=1)
    b.append(doc_id, "## 2026-11-22T12:00:00Z review by b\nalso fine\n")
    a.sync()
    result = b.sync()
    assert result.forks == []
    body = b.read(doc_id).body
    assert body == (
        "# Review history\n## 2026-11-22T11:00:00Z review by a\nfine\n"
        "## 2026-11-22T12:00:00Z review by b\nalso fine\n"
    )


# -- the git merge driver -----------------------------------------------------------------------


def clone(
    tmp_path: Path, name: str, clock: FixedClock | None = None, *, driver: bool = True
) -> Store:
    run_git(tmp_path, "clone", "-q", str(tmp_path / "origin.git"), name)
    if driver:
        mergedriver.register_driver(tmp_path / name)
    return gitmem.open(tmp_path / name, clock=clock)


def test_register_driver(tmp_path: Path) -> None:
    run_git(tmp_path, "init", "-q", "repo")
    assert not mergedriver.driver_registered(tmp_path / "repo")
    mergedriver.register_driver(tmp_path / "repo", python="/opt/my python's/bin/python3")
    assert mergedriver.driver_registered(tmp_path / "repo")
    value = run_git(tmp_path / "repo", "config", "merge.gitmem.driver").strip()
    assert value == "'/opt/my python'\"'\"'s/bin/python3' -P -m gitmem merge-driver %O %A %B %P"


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Store, Store, str]:
    clock = FixedClock("2026-11-22T10:00:00Z")
    origin = gitmem.init(tmp_path / "origin.git", bare=True, clock=clock)
    memory = origin.create("one\ntwo\nthree\nfour\n", title="Shared", tags=["base"])
    return clone(tmp_path, "a", clock), clone(tmp_path, "b", clock), memory.id


def test_git_pull_merges_different_lines_with_the_driver(pair: tuple[Store, Store, str]) -> None:
    a, b, mid = pair
    a.update(mid, "ONE\ntwo\nthree\nfour\n", tags=["base", "from-a"])
    b.clock.advance(seconds=5)  # type: ignore[attr-defined]
    b.update(mid, "one\ntwo\nthree\nFOUR\n", title="Shared (b)")
    a.sync()
    run_git(b.path, "pull", "-q", "--no-rebase", "origin", "main")
    text = (b.path / b.read(mid).path).read_text()  # type: ignore[operator]
    merged = codec.parse(text)
    assert merged.body == "ONE\ntwo\nthree\nFOUR\n"
    assert merged.metadata["title"] == "Shared (b)"
    assert merged.metadata["tags"] == ["base", "from-a"]
    # one update on each side over version 1 (format 3 derives it; format 2 stores it)
    assert gitmem.open(b.path).read(mid).version == 3
    assert run_git(b.path, "status", "--porcelain") == ""


def test_git_pull_keeps_a_fork_without_markers(pair: tuple[Store, Store, str]) -> None:
    a, b, mid = pair
    a.update(mid, "changed by a\n")
    b.update(mid, "changed by b\n")
    a.sync()
    run_git(b.path, "pull", "-q", "--no-rebase", "origin", "main")
    path = b.path / b.read(mid).path  # type: ignore[operator]
    no_markers(path.read_bytes())
    [pending] = mergedriver.load_pending(b.db().gitdir)
    forks = S.commit_pending_forks(b.db())
    assert [f.id for f in forks] == [pending.fork.id]
    bodies = {b.read(mid).body, b.read(pending.fork.id).body}
    assert bodies == {"changed by a\n", "changed by b\n"}
    assert b.read(pending.fork.id).extra[M.FORK_KEY] == mid
    assert mergedriver.load_pending(b.db().gitdir) == []
    assert run_git(b.path, "status", "--porcelain") == ""
    message = run_git(b.path, "log", "-1", "--format=%B")
    assert f"Gitmem-Fork: {pending.fork.id} of {mid}" in message


def test_pending_forks_of_an_aborted_merge_are_dropped(pair: tuple[Store, Store, str]) -> None:
    a, b, mid = pair
    a.update(mid, "changed by a\n")
    (a.path / "gitmem.yaml").write_text("format: 6\nscope: repo\n# a\n")
    run_git(a.path, "commit", "-qam", "config a")
    b.update(mid, "changed by b\n")
    (b.path / "gitmem.yaml").write_text("format: 6\nscope: repo\n# b\n")
    run_git(b.path, "commit", "-qam", "config b")
    a.sync()
    out = run_git(b.path, "pull", "--no-rebase", "origin", "main", check=False)
    assert "CONFLICT" in out  # gitmem.yaml, not the memory
    assert len(mergedriver.load_pending(b.db().gitdir)) == 1
    assert S.commit_pending_forks(b.db()) == []  # still merging: wait
    run_git(b.path, "merge", "--abort")
    assert S.commit_pending_forks(b.db()) == []
    assert mergedriver.load_pending(b.db().gitdir) == []


def test_an_unregistered_clone_falls_back_visibly(tmp_path: Path) -> None:
    clock = FixedClock("2026-11-22T10:00:00Z")
    origin = gitmem.init(tmp_path / "origin.git", bare=True, clock=clock)
    mid = origin.create("base\n").id
    a = clone(tmp_path, "a", clock)
    b = clone(tmp_path, "b", clock, driver=False)
    assert not mergedriver.driver_registered(b.path)
    a.update(mid, "a\n")
    b.update(mid, "b\n")
    a.sync()
    out = run_git(b.path, "pull", "--no-rebase", "origin", "main", check=False)
    assert "CONFLICT" in out  # git's own text merge: the user sees it and can register


def test_hostile_paths_cannot_inject_commands(tmp_path: Path) -> None:
    """git single-quotes %P; the driver gets the path as one argument, and runs nothing."""
    run_git(tmp_path, "init", "-q", "-b", "main", "repo")
    repo = tmp_path / "repo"
    # An "interpreter" that records the arguments it gets, then runs the real driver.
    spy = tmp_path / "spy python"
    spy.write_text(
        f"#!{sys.executable}\n"
        "import json, sys, runpy\n"
        f"open({str(tmp_path / 'argv.json')!r}, 'w').write(json.dumps(sys.argv[1:]))\n"
        "sys.argv = sys.argv[3:]\n"
        "runpy.run_module('gitmem', run_name='__main__')\n"
    )
    spy.chmod(0o755)
    mergedriver.register_driver(repo, python=str(spy))
    (repo / ".gitattributes").write_text("*.md merge=gitmem\n")
    name = "x'; touch pwned; echo '$(touch pwned2).md"
    (repo / name).write_text("a\nb\nc\n")
    run_git(repo, "add", ".")
    run_git(repo, "commit", "-qm", "base")
    run_git(repo, "checkout", "-qb", "side")
    (repo / name).write_text("A\nb\nc\n")
    run_git(repo, "commit", "-qam", "side")
    run_git(repo, "checkout", "-q", "main")
    (repo / name).write_text("a\nb\nC\n")
    run_git(repo, "commit", "-qam", "main")
    run_git(repo, "merge", "-q", "side", "-m", "merge")
    assert (repo / name).read_text() == "A\nb\nC\n"  # git merge-file through our driver
    argv = json.loads((tmp_path / "argv.json").read_text())
    assert argv[:3] == ["-P", "-m", "gitmem"] and argv[3] == "merge-driver" and argv[-1] == name
    assert not (repo / "pwned").exists() and not (repo / "pwned2").exists()
    assert not list(tmp_path.glob("pwned*"))


def test_driver_runs_from_the_command_line(tmp_path: Path) -> None:
    base, ours, theirs = tmp_path / "o", tmp_path / "a", tmp_path / "b"
    base.write_bytes(doc("one\ntwo\nthree\n"))
    ours.write_bytes(doc("ONE\ntwo\nthree\n"))
    theirs.write_bytes(doc("one\ntwo\nTHREE\n"))
    import subprocess

    result = subprocess.run(
        [sys.executable, "-m", "gitmem", "merge-driver", str(base), str(ours), str(theirs), PATH],
        cwd=tmp_path,
        capture_output=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert parsed(ours.read_bytes()).body == "ONE\ntwo\nTHREE\n"


def test_init_registers_the_driver(tmp_path: Path) -> None:
    for store in (gitmem.init(tmp_path / "s"), gitmem.init(tmp_path / "b.git", bare=True)):
        assert mergedriver.driver_registered(store.db().gitdir)
    assert "merge-driver %O %A %B %P" in run_git(tmp_path / "s", "config", "merge.gitmem.driver")


def test_hooks_install_registers_the_driver(tmp_path: Path) -> None:
    from gitmem.entry import hooks

    gitmem.init(tmp_path / "origin.git", bare=True)
    run_git(tmp_path, "clone", "-q", str(tmp_path / "origin.git"), "clone")
    assert not mergedriver.driver_registered(tmp_path / "clone")
    hooks.install(tmp_path / "clone", "memory")
    assert mergedriver.driver_registered(tmp_path / "clone")


# -- the merge table through plain git -------------------------------------------------------------


def test_git_pull_appended_documents(pair: tuple[Store, Store, str]) -> None:
    a, b, _ = pair
    doc_id = "projects/demo/command_history"
    a.create("# Commands\n", id=doc_id, title="Commands")
    a.sync()
    run_git(b.path, "pull", "-q", "--no-rebase", "origin", "main")
    a.append(doc_id, "## 2026-11-22T10:05:00Z ran tests\nok\n")
    b.append(doc_id, "## 2026-11-22T10:01:00Z ran lint\nok\n")
    a.sync()
    run_git(b.path, "pull", "-q", "--no-rebase", "origin", "main")
    assert b.read(doc_id).body == (
        "# Commands\n## 2026-11-22T10:01:00Z ran lint\nok\n## 2026-11-22T10:05:00Z ran tests\nok\n"
    )
    assert mergedriver.load_pending(b.db().gitdir) == []


def test_git_pull_both_add_and_both_supersede(pair: tuple[Store, Store, str]) -> None:
    a, b, mid = pair
    new_a, new_b = a.supersede(mid, "by a\n"), b.supersede(mid, "by b\n")
    only_a, only_b = a.create("a\n"), b.create("b\n")
    a.sync()
    run_git(b.path, "pull", "-q", "--no-rebase", "origin", "main")
    assert {m.id for m in b.successors(mid)} == {new_a.id, new_b.id}
    assert {only_a.id, only_b.id} <= {m.id for m in b.list()}


def test_git_stops_on_delete_against_change_and_sync_keeps_the_change(
    pair: tuple[Store, Store, str],
) -> None:
    a, b, mid = pair
    a.delete(mid)
    b.update(mid, "changed\n")
    a.sync()
    out = run_git(b.path, "pull", "--no-rebase", "origin", "main", check=False)
    assert "CONFLICT (modify/delete)" in out  # git calls no driver for this one
    run_git(b.path, "merge", "--abort")
    result = b.sync()
    assert result.kept_over_delete == [mid] and b.read(mid).body == "changed\n"


def test_git_rebase_uses_the_driver_and_keeps_a_fork(pair: tuple[Store, Store, str]) -> None:
    a, b, mid = pair
    a.update(mid, "rebased onto\n")
    b.update(mid, "rebased commit\n")
    a.sync()
    run_git(b.path, "pull", "-q", "--rebase", "origin", "main")
    assert operation_in_progress(b.db().gitdir) is None
    [fork] = S.commit_pending_forks(b.db())
    bodies = {b.read(mid).body, b.read(fork.id).body}
    assert bodies == {"rebased onto\n", "rebased commit\n"}
    assert run_git(b.path, "status", "--porcelain") == ""


# -- properties ------------------------------------------------------------------------------------

_LINES = st.lists(st.sampled_from(["a\n", "b\n", "c\n", "d\n", "e\n", "\n"]), max_size=12)


def _edit(lines: list[str], data: st.DataObject) -> list[str]:
    out = list(lines)
    for _ in range(data.draw(st.integers(0, 3))):
        kind = data.draw(st.sampled_from(["insert", "delete", "replace"]))
        at = data.draw(st.integers(0, len(out)))
        line = data.draw(st.sampled_from(["X\n", "Y\n", "Z\n", "a\n"]))
        if kind == "insert":
            out.insert(at, line)
        elif out and at < len(out):
            if kind == "delete":
                del out[at]
            else:
                out[at] = line
    return out


@settings(max_examples=300, deadline=None)
@given(base=_LINES, data=st.data())
def test_line_merge_properties(base: list[str], data: st.DataObject) -> None:
    ours, theirs = _edit(base, data), _edit(base, data)
    merged = M.merge_lines(base, ours, theirs)
    assert merged == M.merge_lines(base, theirs, ours)  # the direction does not matter
    assert M.merge_lines(base, base, theirs) == theirs
    assert M.merge_lines(base, ours, base) == ours
    assert M.merge_lines(base, ours, ours) == ours


_BODIES = st.lists(st.sampled_from(["one\n", "two\n", "three\n", "four\n"]), min_size=1, max_size=6)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_memory_merge_always_gives_readable_memories(data: st.DataObject) -> None:
    base_body = "".join(data.draw(_BODIES))

    def side() -> bytes:
        body = "".join(_edit(base_body.splitlines(keepends=True), data)) or "x\n"
        tags = data.draw(st.sampled_from(["", "tags: [a]\n", "tags: [a, b]\n", "tags: [c]\n"]))
        return doc(body, extra=tags)

    base, ours, theirs = doc(base_body), side(), side()
    hours = [data.draw(st.sampled_from(["10:00:00", "11:00:00"])) for _ in range(2)]
    counts = (data.draw(st.integers(2, 4)), data.draw(st.integers(2, 4)))
    sides = later(hours[0], hours[1], counts) if data.draw(st.booleans()) else None
    swapped = None if sides is None else M.DerivedSides(sides.theirs, sides.ours)
    one = M.merge_file(PATH, base, ours, theirs, derived=sides)
    other = M.merge_file(PATH, base, theirs, ours, derived=swapped)
    assert (one.data, one.forks) == (other.data, other.forks)
    assert one.conflict is None
    from gitmem.format.memfile import decode as decode_memory

    kept = decode_memory(one.data, PATH)
    no_markers(one.data)
    for fork in one.forks:
        assert decode_memory(fork.data, fork.path).extra[M.FORK_KEY] == MID
    # Nothing lost: each side's body is at the path, in a fork, or merged in line by line.
    bodies = [kept.body] + [parsed(f.data).body for f in one.forks]
    for data_side in (ours, theirs):
        side_body = parsed(data_side).body
        assert side_body in bodies or all(
            line in kept.body.splitlines(keepends=True)
            for line in side_body.splitlines(keepends=True)
            if line not in base_body.splitlines(keepends=True)
        )


def test_driver_exit_codes(tmp_path: Path) -> None:
    run_git(tmp_path, "init", "-q", "repo")
    repo = tmp_path / "repo"
    files = [repo / n for n in ("o", "a", "b")]

    def run(path: str, base: bytes, ours: bytes, theirs: bytes) -> tuple[int, bytes]:
        for file, data in zip(files, (base, ours, theirs), strict=True):
            file.write_bytes(data)
        code = mergedriver.run_driver(*(str(f) for f in files), path, cwd=repo)
        return code, files[1].read_bytes()

    # A memory with an unreadable side: git is told it conflicted, and no markers are written.
    code, out = run(PATH, doc("x\n"), b"---\nid: [broken\n---\nbody\n", doc("y\n"))
    assert code == 1
    no_markers(out)
    # A markdown file that is not a memory: git's own text merge, markers and all.
    code, out = run("README.md", b"a\n", b"b\n", b"c\n")
    assert code == 1 and b"<<<<<<<" in out
    code, out = run("README.md", b"a\nb\nc\n", b"A\nb\nc\n", b"a\nb\nC\n")
    assert code == 0 and out == b"A\nb\nC\n"


def test_post_merge_hook_commits_the_waiting_fork(pair: tuple[Store, Store, str]) -> None:
    """With the hooks installed, a plain git pull leaves nothing waiting: post-merge commits it."""
    from gitmem.entry import hooks as gh

    a, b, mid = pair
    gh.install(b.path, "memory")
    a.update(mid, "changed by a\n")
    b.update(mid, "changed by b\n")
    a.sync()
    result = subprocess.run(
        ["git", "-C", str(b.path), "pull", "--no-rebase", "origin", "main"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "gitmem: fork: kept" in result.stdout + result.stderr
    assert mergedriver.load_pending(b.db().gitdir) == []
    forks = [m for m in b.list() if m.extra.get(M.FORK_KEY) == mid]
    assert len(forks) == 1
    assert {b.read(mid).body, forks[0].body} == {"changed by a\n", "changed by b\n"}
    assert run_git(b.path, "status", "--porcelain") == ""
