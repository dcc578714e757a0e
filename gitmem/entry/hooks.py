"""Git hooks: install them into a memory or project repository, and the work they do.

``gitmem hooks install`` writes one small sh script per hook (from the template
``hooks/gitmem-hook.sh``) into the repository's hooks directory, wherever
``core.hooksPath`` puts it. A hook that was there before is moved aside to
``<name>.pre-gitmem`` and still runs first; ``uninstall`` puts it back.

The scripts call ``python -m gitmem hook-run`` with the interpreter recorded at
install time, so a gitmem installed in a virtualenv works from any shell. The
work itself is :func:`run`:

- memory repository: ``pre-commit`` validates the staged memory files (a file carrying
  ``version`` or ``updated_at``, which are derived from history, is refused);
  ``post-merge``, ``post-rewrite`` (after ``git pull --rebase``) and ``post-checkout``
  commit the forks the merge driver left waiting, catch the index up and report
  version-chain forks.
- project repository: ``post-merge``, ``post-checkout`` and ``post-commit`` run
  ``gitmem check --project`` when that command exists, else catch the index up.
  They never fail the user's git command.
"""

from __future__ import annotations

import contextlib
import functools
import os
import stat
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gitmem.base.errors import GitmemError, InvalidInputError, StoreError
from gitmem.format.layout import (
    CONFIG_FILE,
    MEMORY_ROOTS,
    history_paths,
    id_from_path,
    is_memory_file,
    memory_path,
)
from gitmem.git.command import REPO_ENV, cat_blobs, clean_env, run_git
from gitmem.git.localconfig import read_limit
from gitmem.git.objects import OVER_READ_LIMIT

if TYPE_CHECKING:
    from gitmem.format.secrets import SecretPolicy

MEMORY_HOOKS = ("pre-commit", "post-merge", "post-checkout", "post-rewrite")
PROJECT_HOOKS = ("post-merge", "post-checkout", "post-commit")
SERVER_HOOKS = ("pre-receive",)
"""A hub's (``gitmem hooks install --server``): refuses pushes gitmem would not write."""
ALL_HOOKS = (
    "pre-commit",
    "post-merge",
    "post-checkout",
    "post-rewrite",
    "post-commit",
    "pre-receive",
)
ROLES = ("memory", "project", "server")
MARKER = "# gitmem-hook:"
CHAINED = ".pre-gitmem"
"""Suffix of an existing hook moved aside by install (run first by ours, restored by uninstall)."""

_GIT_ENV = REPO_ENV
"""What a project's hook drops before gitmem opens the store (a repository of its own)."""

Out = Callable[[str], None]


# -- running git -----------------------------------------------------------------------


def _clean_env() -> dict[str, str]:
    """The environment without the variables that would point git at another repository."""
    return clean_env()


def _git(
    cwd: Path,
    *args: str,
    input: bytes | None = None,
    check: bool = True,
    keep_repo_env: bool = True,
) -> bytes:
    """git in the repository a hook runs in.

    Trusted: inside a hook, git is already running this repository's configuration at
    the user's request, so gitmem's policy would protect nothing there; outside a hook
    (``hooks install``/``status``) only ``rev-parse`` runs, which starts no program.
    Git's environment is kept in a hook: the pre-commit hook must read the index git
    commits (``GIT_INDEX_FILE``).
    """
    result = run_git(
        args, cwd=cwd, input=input, check=check, trusted=True, keep_repo_env=keep_repo_env
    )
    return result.stdout


# -- installing --------------------------------------------------------------------------


def repository_for(
    *, project: Path | None = None, server: Path | None = None
) -> tuple[Path, str]:
    """The repository ``gitmem hooks --project PATH`` (its work tree, role ``project``) or
    ``--server PATH`` (a hub's git directory, role ``server``) names; one of the two."""
    import pygit2

    if project is not None and server is not None:
        raise InvalidInputError("--project and --server name different repositories: give one")
    if server is not None:
        found = pygit2.discover_repository(str(server))
        if found is None:
            raise StoreError(f"{server} is not a git repository")
        return Path(found).resolve(), "server"
    if project is None:
        raise InvalidInputError("name a repository: --project PATH or --server PATH")
    found = pygit2.discover_repository(str(project))
    if found is None:
        raise StoreError(f"{project} is not in a git repository")
    repo = pygit2.Repository(found)
    return Path(repo.workdir or repo.path).resolve(), "project"


def template() -> str:
    """The hook script template (``hooks/gitmem-hook.sh``; in a wheel, ``gitmem/_hooks``)."""
    package = Path(__file__).resolve().parents[1]
    for candidate in (package / "_hooks", package.parent / "hooks"):
        path = candidate / "gitmem-hook.sh"
        if path.is_file():
            return path.read_text()
    raise StoreError("the hook script template gitmem-hook.sh is missing from this installation")


def _shell_quote_free(value: str) -> str:
    if "'" in value:
        raise InvalidInputError(f"cannot install hooks for an interpreter path with ': {value}")
    return value


def render(hook: str, role: str, python: str | None = None) -> str:
    """The script installed as ``hook`` for a repository of ``role``."""
    if hook not in ALL_HOOKS:
        raise InvalidInputError(f"unknown hook {hook!r} (gitmem has: {', '.join(ALL_HOOKS)})")
    if role not in ROLES:
        raise InvalidInputError(f"unknown role {role!r} (memory, project or server)")
    interpreter = _shell_quote_free(python or sys.executable)
    return (
        template().replace("@HOOK@", hook).replace("@ROLE@", role).replace("@PYTHON@", interpreter)
    )


def hooks_dir(repo: Path) -> Path:
    """The directory git runs ``repo``'s hooks from (``core.hooksPath`` respected)."""
    if not repo.exists():
        raise StoreError(f"no repository at {repo}")
    found = _git(repo, "rev-parse", "--git-path", "hooks", keep_repo_env=False).decode().strip()
    return (repo / found).resolve() if not Path(found).is_absolute() else Path(found)


def _is_ours(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            head = fh.read(200)
    except OSError:
        return False
    return MARKER.encode() in head


def _script_field(path: Path, name: str) -> str | None:
    with contextlib.suppress(OSError):
        for line in path.read_text(errors="replace").splitlines()[:12]:
            if line.startswith(f"{name}='"):
                return line.split("'")[1]
    return None


@dataclass
class HookState:
    """One hook name in one hooks directory."""

    name: str
    path: Path
    installed: bool
    """Our script is in place."""
    chained: bool
    """An earlier hook is kept as ``<name>.pre-gitmem`` and run first."""
    foreign: bool
    """Some other hook is in place (not ours)."""
    role: str | None = None
    python: str | None = None
    outdated: bool = False
    """Ours, but not what this gitmem installs (an older script, e.g. without python -P):
    ``gitmem hooks install`` rewrites it."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "path": str(self.path),
            "installed": self.installed,
            "outdated": self.outdated,
            "chained": self.chained,
            "foreign": self.foreign,
            "role": self.role,
            "python": self.python,
        }


def _outdated(path: Path, name: str, role: str | None, python: str | None) -> bool:
    if role not in ROLES or not python:
        return True
    try:
        return path.read_text() != render(name, role, python)
    except (OSError, GitmemError):
        return True


def _state(directory: Path, name: str) -> HookState:
    path = directory / name
    ours = _is_ours(path)
    role = _script_field(path, "role") if ours else None
    python = _script_field(path, "python") if ours else None
    return HookState(
        name=name,
        path=path,
        installed=ours,
        chained=(directory / f"{name}{CHAINED}").exists(),
        foreign=path.exists() and not ours,
        role=role,
        python=python,
        outdated=ours and _outdated(path, name, role, python),
    )


@dataclass
class Report:
    """What install, uninstall or status found or did in one repository."""

    repo: Path
    hooks_dir: Path
    role: str | None
    hooks: list[HookState] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    """Hook names written (install) or removed (uninstall)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "repo": str(self.repo),
            "hooks_dir": str(self.hooks_dir),
            "role": self.role,
            "changed": self.changed,
            "hooks": [h.to_dict() for h in self.hooks],
        }


def install(repo: Path, role: str, *, python: str | None = None) -> Report:
    """Put gitmem's hooks for ``role`` in ``repo``; idempotent; existing hooks are chained."""
    names = {"memory": MEMORY_HOOKS, "server": SERVER_HOOKS}.get(role, PROJECT_HOOKS)
    directory = hooks_dir(repo)
    directory.mkdir(parents=True, exist_ok=True)
    report = Report(repo, directory, role)
    for name in names:
        path = directory / name
        text = render(name, role, python)
        if path.exists() or path.is_symlink():
            if _is_ours(path):
                if path.read_text() == text and os.access(path, os.X_OK):
                    continue
            else:
                aside = directory / f"{name}{CHAINED}"
                if aside.exists() or aside.is_symlink():
                    raise StoreError(
                        f"{path} is not gitmem's and {aside.name} is taken",
                        hint="move one of them away, then run gitmem hooks install again",
                    )
                path.rename(aside)
        tmp = directory / f".{name}.gitmem-tmp"
        tmp.write_text(text)
        tmp.chmod(tmp.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH | 0o644)
        tmp.replace(path)
        report.changed.append(name)
    if role == "memory":
        # A clone has no merge.gitmem.driver (git never copies config): set it with the hooks.
        from gitmem.store.merge import register_driver

        register_driver(repo, python)
    report.hooks = [_state(directory, name) for name in ALL_HOOKS]
    return report


def uninstall(repo: Path) -> Report:
    """Remove gitmem's hooks from ``repo`` and put back the hooks they replaced."""
    directory = hooks_dir(repo)
    report = Report(repo, directory, None)
    for name in ALL_HOOKS:
        path = directory / name
        if not _is_ours(path):
            continue
        path.unlink()
        aside = directory / f"{name}{CHAINED}"
        if aside.exists() or aside.is_symlink():
            aside.rename(path)
        report.changed.append(name)
    report.hooks = [_state(directory, name) for name in ALL_HOOKS]
    return report


def status(repo: Path) -> Report:
    directory = hooks_dir(repo)
    states = [_state(directory, name) for name in ALL_HOOKS]
    roles = {s.role for s in states if s.role}
    return Report(repo, directory, roles.pop() if len(roles) == 1 else None, states)


# -- validating staged files --------------------------------------------------------------


@dataclass(frozen=True)
class Staged:
    path: str
    mode: str
    oid: str
    data: bytes | int
    """The file's bytes, or its size where it is over the read bound (unread)."""


@dataclass(frozen=True)
class Refusal:
    path: str
    reason: str

    def line(self) -> str:
        return f"gitmem: refused: {self.path}: {self.reason}"


_ROOT_PATHSPECS = tuple(f"{root}/" for root in MEMORY_ROOTS)


def _staged_index(top: Path) -> dict[str, tuple[str, str]]:
    """Every index entry under the memory folders: path -> (mode, blob id)."""
    out: dict[str, tuple[str, str]] = {}
    raw = _git(top, "ls-files", "-s", "-z", "--", *_ROOT_PATHSPECS)
    for record in raw.split(b"\0"):
        if not record:
            continue
        info, _, path = record.partition(b"\t")
        mode, oid, _stage = info.decode().split()
        out[path.decode("utf-8", "surrogateescape")] = (mode, oid)
    return out


def _changed_paths(top: Path) -> list[str]:
    raw = _git(
        top,
        "diff",
        "--cached",
        "--name-only",
        "-z",
        "--no-renames",
        "--diff-filter=ACMRT",
        "--",
        *_ROOT_PATHSPECS,
    )
    return [p.decode("utf-8", "surrogateescape") for p in raw.split(b"\0") if p]


def _read_blobs(top: Path, oids: Sequence[str], limit: int) -> list[bytes | int | None]:
    """The staged blobs ``oids`` (:func:`cat_blobs`): the size of one over ``limit``, unread."""
    return cat_blobs(lambda mode, data: _git(top, "cat-file", mode, input=data), oids, limit)


def _staged_format(top: Path) -> int:
    """The store format of the tree being committed (gitmem.yaml as staged; 1 without)."""
    from gitmem.format import codec
    from gitmem.format.config import StoreConfig

    result = run_git(
        ["cat-file", "blob", f":{CONFIG_FILE}"],
        cwd=top,
        check=False,
        trusted=True,
        keep_repo_env=True,
    )
    if result.returncode != 0:
        return 1
    try:
        return StoreConfig.from_text(codec.decode(result.stdout, what=CONFIG_FILE)).format
    except GitmemError:
        return 1


def _ever_existed(top: Path, *paths: str) -> bool:
    """Whether any commit had a file at one of ``paths``."""
    return bool(_git(top, "log", "--all", "-1", "--format=%H", "--", *paths, check=False).strip())


def decode_memory(data: bytes, path: str) -> Any:
    """Parse and validate one memory file the way the store reads it (a Memory, or raises)."""
    # Imported here: a project hook (gitmem check) never parses a memory file itself.
    from gitmem.format import memfile

    return memfile.decode(data, path)


Validator = Callable[[bytes, str], Any]


@functools.cache
def _secrets_then_memory() -> Validator:
    # Built on first use: gitmem.format.secrets compiles its patterns when imported, which a
    # project hook that validates nothing should not pay for.

    return staged_validator(decode_memory)


def _validate_memory_file(data: bytes, path: str) -> Any:
    """Refuse a staged memory file holding a credential, else :func:`decode_memory` it."""
    return _secrets_then_memory()(data, path)


VALIDATORS: list[tuple[Callable[[str], bool], Validator]] = [
    # Credentials are refused before anything else is said about the file.
    (is_memory_file, _validate_memory_file),
]
"""Which staged paths are validated, and how. Layered documents add their own entry."""


def _reason(exc: Exception, path: str) -> str:
    message = str(exc)
    for prefix in (f"{path}: ", f"{path} "):
        if message.startswith(prefix):
            message = message[len(prefix) :]
    return " ".join(message.split())


def pre_commit(top: Path, out: Out) -> int:
    """Validate the staged memory files; 1 with one line per bad file, else 0."""
    changed = _changed_paths(top)
    if not changed:
        return 0
    from gitmem.format import memfile
    from gitmem.format.config import FORMAT
    from gitmem.format.model import Memory

    found = _staged_format(top)
    if found != FORMAT:
        out(
            f"gitmem: commit refused: this store is format {found}; run `gitmem migrate` "
            f"to convert it (one commit)"
            if found < FORMAT
            else f"gitmem: commit refused: this store is format {found}; upgrade gitmem"
        )
        return 1
    index = _staged_index(top)
    todo = [p for p in changed if p in index and any(ok(p) for ok, _ in VALIDATORS)]
    gitdir = _git(top, "rev-parse", "--absolute-git-dir").decode().strip()
    limit = read_limit(gitdir)
    blobs = _read_blobs(top, [index[p][1] for p in todo], limit)
    staged = [
        Staged(p, index[p][0], index[p][1], data or b"")
        for p, data in zip(todo, blobs, strict=True)
    ]
    refusals: list[Refusal] = []
    valid: list[tuple[Staged, Any]] = []
    for item in staged:
        if item.mode not in {"100644", "100755"}:
            refusals.append(Refusal(item.path, "is not a regular file"))
            continue
        if isinstance(item.data, int):
            too_big = f"is {item.data} bytes, {OVER_READ_LIMIT} of {limit}"
            refusals.append(Refusal(item.path, too_big))
            continue
        validate = next(v for ok, v in VALIDATORS if ok(item.path))
        try:
            memory = validate(item.data, item.path)
        except GitmemError as exc:
            refusals.append(Refusal(item.path, _reason(exc, item.path)))
            continue
        valid.append((item, memory))
        carried = memfile.carries_derived(memory) if isinstance(memory, Memory) else []
        if carried:
            refusals.append(
                Refusal(
                    item.path,
                    f"carries {' and '.join(carried)}, which gitmem derives from history; "
                    "remove the line (docs/format.md)",
                )
            )
    present = {id_from_path(p) for p in index} - {None}
    seen: dict[str, str] = {}
    for item, memory in valid:
        other = seen.setdefault(memory.id, item.path)
        if other != item.path:
            refusals.append(Refusal(item.path, f"duplicate id {memory.id} (also in {other})"))
        target = memory.supersedes
        if target is None or target in present:
            continue
        if target == memory.id:
            refusals.append(Refusal(item.path, "supersedes itself"))
        elif not _ever_existed(top, *history_paths(memory_path(target))):
            refusals.append(Refusal(item.path, f"supersedes {target}, which is not in this store"))
    if refusals:
        for refusal in refusals:
            out(refusal.line())
        out(f"gitmem: commit refused: {len(refusals)} problem(s) in staged memory files")
        return 1
    return 0


# -- after merge and checkout ----------------------------------------------------------------


def _changed_between(top: Path, old: str, new: str) -> list[str]:
    raw = _git(
        top,
        "diff",
        "--name-only",
        "-z",
        "--no-renames",
        "--diff-filter=AMRT",
        old,
        new,
        "--",
        *_ROOT_PATHSPECS,
        check=False,
    )
    return [p.decode("utf-8", "surrogateescape") for p in raw.split(b"\0") if p]


def _rev(top: Path, name: str) -> str | None:
    value = _git(top, "rev-parse", "-q", "--verify", f"{name}^{{commit}}", check=False).strip()
    return value.decode() if value else None


def memory_after(
    top: Path, out: Out, old: str | None, new: str | None, *, hook: str = "post-merge"
) -> int:
    """Catch the store's index up, report forks among memories changed from old to new,
    and run the lifecycle jobs configured for ``hook`` in gitmem.yaml."""
    from gitmem.entry.jobs import run_jobs
    from gitmem.store.discovery import open_store
    from gitmem.store.sync import commit_pending_forks

    store = open_store(top)
    # Forks the merge driver had to leave waiting (it can write only the one file git asks
    # for) are committed now that the merge has landed, before the index catches up, so
    # the next plain git push carries them. git still has MERGE_HEAD (post-merge) or
    # rebase-merge/ (post-rewrite, after a rebase that may have dropped the commit the
    # fork came from) in place while the hook runs, though the branch has moved: tell
    # the sync code not to wait for the merge to finish.
    landed = hook in {"post-merge", "post-rewrite"}
    forks = commit_pending_forks(store.db(), merge_landed=landed)
    for fork in forks:
        out(f"gitmem: fork: kept {fork.id} beside {fork.of}")
    store.index().catch_up()
    if old and new and set(old) != {"0"}:
        _report_forks(store, top, out, old, new)
    run_jobs(store, hook, out)
    return 0


def _report_forks(store: Any, top: Path, out: Out, old: str, new: str) -> None:
    reported: set[str] = set()
    for path in _changed_between(top, old, new):
        memory_id = id_from_path(path)
        if memory_id is None:
            continue
        try:
            memory = store.get(memory_id)
        except GitmemError:
            continue
        target = memory.supersedes if memory is not None else None
        if target is None or target in reported:
            continue
        successors = store.successors(target)
        if len(successors) > 1:
            reported.add(target)
            ids = ", ".join(m.id for m in successors)
            out(f"gitmem: fork: {target} has {len(successors)} successors: {ids}")


def project_after(top: Path, out: Out) -> int:
    """In a project repository: what ``gitmem check --project`` reports (the memories whose
    anchored files this commit changed), through the library, as the command prints it."""
    from gitmem.features.lifecycle import check_project
    from gitmem.store.discovery import find_project_store, is_store, open_store, user_store_path

    if find_project_store(top) is None and not is_store(user_store_path()):
        return 0  # no store to check against, and a hook creates none
    # On stdout, where `gitmem check` prints it (hook notices go to ``out``: stderr).
    print(check_project(open_store(cwd=top), top).summary())
    return 0


# -- hook-run ------------------------------------------------------------------------------


def detect_role(top: Path) -> str:
    """memory when ``top`` is a gitmem store, else project."""
    from gitmem.format.layout import CONFIG_FILE

    config_file = top / CONFIG_FILE
    if not config_file.is_file():
        return "project"
    try:
        config = _git(top, "config", "--get", "gitmem.format", check=False).strip()
    except StoreError:
        config = b""
    if config:
        return "memory"
    # A clone of a store has no gitmem.* git config (git never copies config), but it
    # has the committed gitmem.yaml: a store's config says which format it is.
    # Read with the store's own hardened loader (no aliases, no tags, bounded depth): this
    # file arrives from a remote.
    from gitmem.format.yamlio import load_yaml

    try:
        data, _ = load_yaml(config_file.read_text(encoding="utf-8")[:65536])
    except (OSError, UnicodeDecodeError, GitmemError):
        return "project"
    return "memory" if isinstance(data, dict) and "format" in data else "project"


def run(
    name: str,
    args: Sequence[str],
    *,
    role: str = "auto",
    cwd: Path | None = None,
    out: Out | None = None,
    env: dict[str, str] | None = None,
) -> int:
    """The work of hook ``name``; returns its exit code (only a memory pre-commit refuses)."""
    write = out or (lambda line: print(line, file=sys.stderr))
    env = dict(os.environ) if env is None else env
    top = (cwd or Path.cwd()).resolve()
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
            for var in _GIT_ENV:
                os.environ.pop(var, None)
            if name in PROJECT_HOOKS:
                return project_after(top, write)
            return 0
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
            old, new = _refs(top, name, args, env)
            return memory_after(top, write, old, new, hook=name)
        except Exception as exc:
            message = " ".join(str(exc).split()) or type(exc).__name__
            write(f"gitmem: warning: {name} hook: {message}")
            return 0
    return 0


def _refs(top: Path, name: str, args: Sequence[str], env: dict[str, str]) -> tuple[str | None, ...]:
    """The commits before and after, from git's arguments or the pre-commit framework's env."""
    if name == "post-checkout":
        if len(args) >= 2:
            return args[0], args[1]
        old = env.get("PRE_COMMIT_FROM_REF")
        new = env.get("PRE_COMMIT_TO_REF")
        return old, new
    if name == "post-rewrite" and (not args or args[0] != "rebase"):
        return None, None  # git commit --amend leaves ORIG_HEAD where it was
    return _rev(top, "ORIG_HEAD"), _rev(top, "HEAD")


def staged_policy(cwd: str | None = None) -> SecretPolicy:
    """The policy of the ``gitmem.yaml`` staged in the repository at ``cwd`` (default: here),
    with the user's own settings for the repository's store.

    Git runs hooks at the top of the work tree, so there the staged config
    (``:gitmem.yaml``) is the one the commit will have; without one, the built-in patterns.
    """
    import subprocess
    from collections.abc import Mapping

    from gitmem.format import secrets
    from gitmem.format.config import StoreConfig
    from gitmem.format.layout import CONFIG_FILE
    from gitmem.format.yamlio import load_yaml
    from gitmem.git import localconfig

    try:
        # In the pre-commit hook: git's own GIT_INDEX_FILE is the index being committed.
        result = run_git(
            ["show", f":{CONFIG_FILE}"],
            cwd=cwd,
            check=False,
            timeout=30,
            keep_repo_env=True,
        )
        gitdir = run_git(
            ["rev-parse", "--absolute-git-dir"], cwd=cwd, timeout=30, keep_repo_env=True
        ).stdout.decode("utf-8", "surrogateescape").strip()
    except (OSError, subprocess.SubprocessError, StoreError):
        return secrets.DEFAULT_POLICY
    data: Any = None
    if result.returncode == 0:
        data, _ = load_yaml(result.stdout.decode("utf-8", "replace"))
    committed = StoreConfig(raw=dict(data) if isinstance(data, Mapping) else {})
    # The user's own allow-list for this store applies here as in the store's writes.
    return secrets.policy_from_config(localconfig.with_store_settings(committed, gitdir).raw)


def staged_validator(inner: Callable[[bytes, str], Any]) -> Callable[[bytes, str], Any]:
    """A pre-commit validator (:data:`VALIDATORS`) that refuses a staged memory file
    holding a credential, and otherwise returns what ``inner`` makes of it."""
    from gitmem.format import secrets

    policies: list[secrets.SecretPolicy] = []

    def validate(data: bytes, path: str) -> Any:
        if not policies:
            policies.append(staged_policy())  # once per hook run, not once per file
        findings = secrets.scan_bytes(data, policies[0])
        if findings:
            raise secrets.SecretsFoundError("the file", findings)
        secrets.refuse_values(data, policies[0])  # YAML escapes in a value hide nothing
        return inner(data, path)

    return validate
