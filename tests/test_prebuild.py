"""Subtrees a group-commit writer builds itself (gitmem.git.objects.prebuild): the tree the
leader makes with them is the tree it makes without them, whatever moved in between."""

from __future__ import annotations

import random
from pathlib import Path

import pygit2
import pytest

from gitmem.git.objects import build_tree, prebuild

DIGITS = "0123"


def _path(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.8:  # format 4's memories/a/b/c/d/<id>.md, few digits so folders collide
        folders = "/".join(rng.choice(DIGITS) for _ in range(4))
        return f"memories/{folders}/m{rng.randrange(6)}.md"
    if kind < 0.9:
        return f"notes/{rng.choice('xy')}/n{rng.randrange(3)}.md"
    return rng.choice(["gitmem.yaml", "memories/top.md", "notes/loose.md"])


def _changes(repo: pygit2.Repository, rng: random.Random, n: int) -> dict[str, pygit2.Oid | None]:
    out: dict[str, pygit2.Oid | None] = {}
    for _ in range(n):
        path = _path(rng)
        if rng.random() < 0.25:
            out[path] = None
        else:
            out[path] = repo.create_blob(f"{path} {rng.random()}\n".encode())
    return out


@pytest.mark.parametrize("seed", range(40))
def test_prebuilt_subtrees_give_the_tree_built_without_them(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    repo = pygit2.init_repository(str(tmp_path / "r.git"), bare=True)
    base = repo[build_tree(repo, None, _changes(repo, rng, 40))]
    assert isinstance(base, pygit2.Tree)
    mine = _changes(repo, rng, rng.randrange(1, 4))
    prebuilt = prebuild(repo, base, mine)
    assert all(path.count("/") >= 1 for path in prebuilt)  # never the root or a top folder
    # What other writers committed in between: nothing, a little, or a lot.
    moved = rng.choice([0, 1, 3, 12])
    head = repo[build_tree(repo, base, _changes(repo, rng, moved))] if moved else base
    assert isinstance(head, pygit2.Tree)
    assert build_tree(repo, head, mine, prebuilt=prebuilt) == build_tree(repo, head, mine)
    if moved == 0:
        assert build_tree(repo, base, mine, prebuilt=prebuilt) == build_tree(repo, base, mine)


def test_a_prebuilt_subtree_is_taken_only_on_the_tree_it_was_built_on(tmp_path: Path) -> None:
    repo = pygit2.init_repository(str(tmp_path / "r.git"), bare=True)
    blob = repo.create_blob(b"x\n")
    base = repo[build_tree(repo, None, {"memories/a/b/one.md": blob})]
    assert isinstance(base, pygit2.Tree)
    mine: dict[str, pygit2.Oid | None] = {"memories/a/b/two.md": repo.create_blob(b"two\n")}
    prebuilt = prebuild(repo, base, mine)
    assert set(prebuilt) == {"memories/a", "memories/a/b"}
    # Another writer added memories/a/c meanwhile: memories/a is built again, memories/a/b
    # (unchanged since) is taken as prebuilt; the result holds both writes.
    other: dict[str, pygit2.Oid | None] = {"memories/a/c/three.md": blob}
    head = repo[build_tree(repo, base, other)]
    assert isinstance(head, pygit2.Tree)
    tree = repo[build_tree(repo, head, mine, prebuilt=prebuilt)]
    assert isinstance(tree, pygit2.Tree)
    for path in ("memories/a/b/one.md", "memories/a/b/two.md", "memories/a/c/three.md"):
        assert tree[path] is not None
    # A file where a folder is needed: nothing is prebuilt, the leader meets the error.
    clash = repo[build_tree(repo, None, {"memories/a": blob})]
    assert isinstance(clash, pygit2.Tree)
    assert prebuild(repo, clash, mine) == {}
