"""What gitmem's git hooks do (``gitmem hook-run``, called by the installed scripts).

In a store, ``pre-commit`` validates the staged memory files; after a merge, rebase or
checkout the forks the merge driver left waiting are committed, the index caught up and
version-chain forks reported. In a project, the hooks report ``gitmem check --project`` and
never fail the user's git command. A hub's ``pre-receive`` is :mod:`gitmem.entry.receive`.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from gitmem.base.errors import GitmemError, StoreError
from gitmem.entry.hooks import PROJECT_HOOKS
from gitmem.format.layout import (
    CONFIG_FILE,
    MEMORY_ROOTS,
    history_paths,
    id_from_path,
    is_memory_file,
    memory_path,
)
from gitmem.git.command import REPO_ENV, cat_blobs, run_git
from gitmem.git.localconfig import read_limit
from gitmem.git.objects import OVER_READ_LIMIT

if TYPE_CHECKING:
    from gitmem.entry.jobs import Out
    from gitmem.format.secrets import SecretPolicy

_ROOT_PATHSPECS = tuple(f"{root}/" for root in MEMORY_ROOTS)


def _git(top: Path, *args: str, input: bytes | None = None, check: bool = True) -> bytes:
    """git in the repository a hook runs in: trusted (git already runs this repository's
    configuration here), with git's environment kept (``GIT_INDEX_FILE``: the index the
    pre-commit hook must read)."""
    return run_git(args, cwd=top, input=input, check=check, trusted=True, keep_repo_env=True).stdout


def _memory_paths(top: Path, *diff: str, check: bool = True) -> list[str]:
    """The memory-folder paths ``git diff --name-only <diff>`` names, added or changed."""
    args = ["diff", "--name-only", "-z", "--no-renames", "--diff-filter=ACMRT", *diff]
    raw = _git(top, *args, "--", *_ROOT_PATHSPECS, check=check)
    return [p.decode("utf-8", "surrogateescape") for p in raw.split(b"\0") if p]


def _staged_index(top: Path) -> dict[str, tuple[str, str]]:
    """Every index entry under the memory folders: path -> (mode, blob id)."""
    out: dict[str, tuple[str, str]] = {}
    raw = _git(top, "ls-files", "-s", "-z", "--", *_ROOT_PATHSPECS)
    for record in filter(None, raw.split(b"\0")):
        info, _, path = record.partition(b"\t")
        mode, oid, _stage = info.decode().split()
        out[path.decode("utf-8", "surrogateescape")] = (mode, oid)
    return out


def _staged_config(cwd: str | None) -> bytes | None:
    """The gitmem.yaml staged in the repository at ``cwd`` (in the pre-commit hook, git's
    GIT_INDEX_FILE is the index being committed), or None."""
    result = run_git(
        ["show", f":{CONFIG_FILE}"], cwd=cwd, check=False, timeout=30, keep_repo_env=True
    )
    return result.stdout if result.returncode == 0 else None


def pre_commit(top: Path, out: Out) -> int:
    """Validate the staged memory files; 1 with one line per bad file, else 0.

    A file holding a credential is refused before anything else is said about it."""
    changed = _memory_paths(top, "--cached")
    if not changed:
        return 0
    from gitmem.format import codec, memfile, secrets
    from gitmem.format.config import StoreConfig

    staged = _staged_config(str(top))  # the gitmem.yaml being committed: its format only
    try:
        text = codec.decode(staged, what=CONFIG_FILE) if staged else ""
        StoreConfig.from_text(text).check_supported(CONFIG_FILE)
    except GitmemError as exc:
        out(f"gitmem: commit refused: {exc}" + (f" ({exc.hint})" if exc.hint else ""))
        return 1
    index = _staged_index(top)
    todo = [p for p in changed if p in index and is_memory_file(p)]
    if not todo:
        return 0
    gitdir = _git(top, "rev-parse", "--absolute-git-dir").decode().strip()
    limit = read_limit(gitdir)
    blobs = cat_blobs(  # a blob over the read bound: its size, unread
        lambda mode, data: _git(top, "cat-file", mode, input=data),
        [index[p][1] for p in todo],
        limit,
    )
    policy = staged_policy(str(top))  # the credentials a memory file may not hold
    refusals: list[str] = []
    present = {id_from_path(p) for p in index} - {None}
    for path, data in zip(todo, blobs, strict=True):
        if index[path][0] not in {"100644", "100755"}:
            refusals.append(f"{path}: is not a regular file")
            continue
        if isinstance(data, int):
            refusals.append(f"{path}: is {data} bytes, {OVER_READ_LIMIT} of {limit}")
            continue
        data = data or b""
        try:
            findings = secrets.scan_bytes(data, policy)
            if findings:
                raise secrets.SecretsFoundError("the file", findings)
            secrets.refuse_values(data, policy)  # YAML escapes in a value hide nothing
            memory = memfile.decode(data, path)
        except GitmemError as exc:
            reason = str(exc).removeprefix(f"{path}: ").removeprefix(f"{path} ")
            refusals.append(f"{path}: {' '.join(reason.split())}")
            continue
        carried = memfile.carries_derived(memory)
        if carried:
            refusals.append(
                f"{path}: carries {' and '.join(carried)}, which gitmem derives from "
                "history; remove the line (docs/format.md)"
            )
        target = memory.supersedes
        if target is not None and target not in present:
            paths = history_paths(memory_path(target))
            if not _git(top, "log", "--all", "-1", "--format=%H", "--", *paths, check=False):
                refusals.append(f"{path}: supersedes {target}, which is not in this store")
    if refusals:
        for refusal in refusals:
            out(f"gitmem: refused: {refusal}")
        out(f"gitmem: commit refused: {len(refusals)} problem(s) in staged memory files")
        return 1
    return 0


def staged_policy(cwd: str | None = None) -> SecretPolicy:
    """The credential policy of the ``gitmem.yaml`` staged in the repository at ``cwd``
    (the one the commit will have; without one, the built-in patterns), with the user's own
    settings for the repository's store."""
    import subprocess

    from gitmem.format import secrets
    from gitmem.format.config import StoreConfig
    from gitmem.git import localconfig

    try:
        staged = _staged_config(cwd)
        gitdir = (
            run_git(["rev-parse", "--absolute-git-dir"], cwd=cwd, timeout=30, keep_repo_env=True)
            .stdout.decode("utf-8", "surrogateescape")
            .strip()
        )
    except (OSError, subprocess.SubprocessError, StoreError):
        return secrets.DEFAULT_POLICY
    committed = StoreConfig.from_text(staged.decode("utf-8", "replace") if staged else "")
    # The user's own allow-list for this store applies here as in the store's writes.
    return secrets.policy_from_config(localconfig.with_store_settings(committed, gitdir).raw)


def _rev(top: Path, name: str) -> str | None:
    value = _git(top, "rev-parse", "-q", "--verify", f"{name}^{{commit}}", check=False).strip()
    return value.decode() if value else None


def memory_after(top: Path, out: Out, old: str | None, new: str | None, hook: str) -> int:
    """Catch the store's index up, report forks among memories changed from old to new,
    and run the lifecycle jobs configured for ``hook`` in gitmem.yaml."""
    from gitmem.entry.jobs import run_jobs
    from gitmem.store.discovery import open_store
    from gitmem.store.sync import commit_pending_forks

    store = open_store(top)
    # Forks the merge driver left waiting are committed now, so the next git push carries
    # them; git's MERGE_HEAD or rebase-merge/ is still there, though the merge has landed.
    landed = hook in {"post-merge", "post-rewrite"}
    for fork in commit_pending_forks(store.db(), merge_landed=landed):
        out(f"gitmem: fork: kept {fork.id} beside {fork.of}")
    store.index().catch_up()
    targets: dict[str, None] = {}  # what the memories changed from old to new supersede
    if old and new and set(old) != {"0"}:
        for memory_id in filter(None, map(id_from_path, _memory_paths(top, old, new, check=False))):
            with contextlib.suppress(GitmemError):
                memory = store.get(memory_id)
                if memory is not None and memory.supersedes:
                    targets[memory.supersedes] = None
    for target in targets:
        successors = store.successors(target)
        if len(successors) > 1:
            ids = ", ".join(m.id for m in successors)
            out(f"gitmem: fork: {target} has {len(successors)} successors: {ids}")
    run_jobs(store, hook, out)
    return 0


def project_after(top: Path, name: str = "post-commit") -> int:
    """In a project: print what ``gitmem check --project`` reports (memories whose anchored
    files this commit changed); after a merge, the memory branches it merged land on main."""
    from gitmem.features.lifecycle.anchors import check_project
    from gitmem.store import follow
    from gitmem.store.discovery import open_store
    from gitmem.store.locations import find_project_store, is_store, user_store_path

    project = find_project_store(top)
    if project is None and not is_store(user_store_path()):
        return 0  # no store to check against, and a hook creates none
    store = open_store(cwd=top)
    if project is not None and name == "post-merge":
        for branch in follow.land_merged(store.db(), top, _rev(top, "ORIG_HEAD")):
            print(f"gitmem: landed memory branch {branch} on main", file=sys.stderr)
    # On stdout, where `gitmem check` prints it (hook notices go to stderr).
    print(check_project(store, top).summary())
    return 0


def detect_role(top: Path) -> str:
    """memory when ``top`` is a gitmem store, else project."""
    config_file = top / CONFIG_FILE
    if not config_file.is_file():
        return "project"
    with contextlib.suppress(StoreError):
        if _git(top, "config", "--get", "gitmem.format", check=False).strip():
            return "memory"
    # A clone has no gitmem.* git config, but a store's gitmem.yaml names its format; it
    # arrives from a remote, so the store's hardened loader reads it.
    from gitmem.format.yamlio import load_yaml

    try:
        data, _ = load_yaml(config_file.read_text(encoding="utf-8")[:65536])
    except (OSError, UnicodeDecodeError, GitmemError):
        return "project"
    return "memory" if isinstance(data, dict) and "format" in data else "project"


def run(name: str, args: Sequence[str], *, role: str = "auto") -> int:
    """The work of hook ``name`` in the repository here; returns its exit code (only a memory
    pre-commit refuses)."""
    write = functools.partial(print, file=sys.stderr)
    top = Path.cwd().resolve()
    if role == "auto":
        role = detect_role(top)
    if role == "server":
        if name != "pre-receive":
            return 0
        from gitmem.entry.receive import pre_receive

        # git gives a pre-receive hook one "<old> <new> <ref>" line per ref on stdin.
        return pre_receive(top, sys.stdin.read().splitlines(), write)
    if role == "project":
        try:
            # The store is a repository of its own: git's variables name the project's.
            for var in REPO_ENV:
                os.environ.pop(var, None)
            return project_after(top, name) if name in PROJECT_HOOKS else 0
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt):
                return 0
            message = " ".join(str(exc).split()) or type(exc).__name__
            write(f"gitmem: warning: {name} hook: {message} (your git command is unaffected)")
            return 0
    if detect_role(top) != "memory":
        return 0  # memory hooks in a shared core.hooksPath, run from some other repository
    if name == "pre-commit":
        return pre_commit(top, write)
    if name in {"post-merge", "post-checkout", "post-rewrite"}:
        try:
            old, new = _refs(top, name, args)
            return memory_after(top, write, old, new, name)
        except Exception as exc:
            message = " ".join(str(exc).split()) or type(exc).__name__
            write(f"gitmem: warning: {name} hook: {message}")
            return 0
    return 0


def _refs(top: Path, name: str, args: Sequence[str]) -> tuple[str | None, ...]:
    """The commits before and after, from git's arguments or the pre-commit framework's env."""
    if name == "post-checkout":
        if len(args) >= 2:
            return args[0], args[1]
        return os.environ.get("PRE_COMMIT_FROM_REF"), os.environ.get("PRE_COMMIT_TO_REF")
    if name == "post-rewrite" and (not args or args[0] != "rebase"):
        return None, None  # git commit --amend leaves ORIG_HEAD where it was
    return _rev(top, "ORIG_HEAD"), _rev(top, "HEAD")
