"""What changed between two trees (gitmem.store.commit_changes), read from the raw tree objects,
against the same walk over libgit2's tree entries, on trees made by the git binary with
every kind of entry: odd old modes (100664), executables, links, submodules, non-UTF-8
names, files turned into folders."""

from __future__ import annotations

import itertools
import random
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pygit2
from conftest import run_git

from gitmem.store.commit_changes import tree_changes

_MODES = ["100644", "100755", "100664", "120000", "160000"]


def _reference(
    repo: pygit2.Repository, old: pygit2.Tree | None, new: pygit2.Tree | None, prefix: str
) -> Iterator[tuple[str, pygit2.Oid | None]]:
    """The walk over pygit2's entries (the implementation tree_changes replaced)."""
    if old is not None and new is not None and old.id == new.id:
        return
    before = {str(e.name): e for e in old} if old is not None else {}
    after = {str(e.name): e for e in new} if new is not None else {}
    regular = (0o100644, 0o100755)
    for name in sorted(before.keys() | after.keys()):
        o, n = before.get(name), after.get(name)
        if o is not None and n is not None and o.id == n.id and o.filemode == n.filemode:
            continue
        path = f"{prefix}/{name}"
        o_tree = repo[o.id] if o is not None and o.type_str == "tree" else None
        n_tree = repo[n.id] if n is not None and n.type_str == "tree" else None
        if o_tree is not None or n_tree is not None:
            yield from _reference(repo, o_tree, n_tree, path)  # type: ignore[arg-type]
        o_blob = o.id if o is not None and o.filemode in regular else None
        n_blob = n.id if n is not None and n.filemode in regular else None
        if o_blob != n_blob:
            yield path, n_blob


def _mktree(gitdir: Path, rng: random.Random, depth: int) -> str:
    names = rng.sample(["a.md", "b.md", "caf\udce9.md", "d", "e.md", "x y.md", "z"], 4)
    lines = []
    for name in names:
        raw = name.encode("utf-8", "surrogateescape")
        if depth < 2 and rng.random() < 0.35:
            lines.append(b"040000 tree " + _mktree(gitdir, rng, depth + 1).encode() + b"\t" + raw)
            continue
        mode = rng.choice(_MODES)
        if mode == "160000":
            oid = f"{rng.getrandbits(160):040x}"
            lines.append(f"{mode} commit {oid}\t".encode() + raw)
            continue
        blob = run_git(gitdir, "hash-object", "-w", "--stdin", input=str(rng.randrange(3)))
        lines.append(f"{mode} blob {blob.strip()}\t".encode() + raw)

    done = subprocess.run(
        ["git", "-C", str(gitdir), "mktree"], input=b"\n".join(lines) + b"\n",
        capture_output=True, check=True,
    )
    return done.stdout.decode().strip()


def test_raw_tree_changes_match_the_libgit2_walk(tmp_path: Path) -> None:
    gitdir = tmp_path / "r.git"
    run_git(tmp_path, "init", "-q", "--bare", str(gitdir))
    repo = pygit2.Repository(str(gitdir))
    rng = random.Random(7)
    trees = [_mktree(gitdir, rng, 0) for _ in range(24)]
    compared = 0
    for old_id, new_id in itertools.pairwise(trees):
        old, new = repo[old_id], repo[new_id]
        for a, b in ((old, new), (new, old), (None, new), (old, None)):
            ids = (a.id if a is not None else None, b.id if b is not None else None)
            got = list(tree_changes(repo, *ids, "memories"))
            want = list(_reference(repo, a, b, "memories"))  # type: ignore[arg-type]
            assert got == want
            compared += len(want)
    assert compared > 100
