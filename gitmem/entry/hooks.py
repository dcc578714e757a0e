"""Install gitmem's git hooks into a memory, project or hub repository.

One sh script per hook (from ``hooks/gitmem-hook.sh``) goes where ``core.hooksPath`` says;
a hook already there is moved aside to ``<name>.pre-gitmem`` and still runs first
(``uninstall`` puts it back). The scripts run ``python -m gitmem hook-run`` with the
interpreter recorded at install time; what each does is :mod:`gitmem.entry.hookrun`.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gitmem.base.errors import GitmemError, InvalidInputError, StoreError
from gitmem.git.command import run_git

MEMORY_HOOKS = ("pre-commit", "post-merge", "post-checkout", "post-rewrite")
PROJECT_HOOKS = ("post-merge", "post-checkout", "post-commit")
SERVER_HOOKS = ("pre-receive",)
"""A hub's (``gitmem hooks install --server``): refuses pushes gitmem would not write."""
ALL_HOOKS = tuple(dict.fromkeys(MEMORY_HOOKS + PROJECT_HOOKS + SERVER_HOOKS))
ROLES = ("memory", "project", "server")
MARKER = "# gitmem-hook:"
CHAINED = ".pre-gitmem"
"""Suffix of an existing hook moved aside by install (run first by ours, restored by uninstall)."""


def repository_for(*, project: Path | None = None, server: Path | None = None) -> tuple[Path, str]:
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


def render(hook: str, role: str, python: str | None = None) -> str:
    """The script installed as ``hook`` for a repository of ``role``."""
    interpreter = python or sys.executable
    if "'" in interpreter:
        raise InvalidInputError(
            f"cannot install hooks for an interpreter path with ': {interpreter}"
        )
    return (
        template().replace("@HOOK@", hook).replace("@ROLE@", role).replace("@PYTHON@", interpreter)
    )


def hooks_dir(repo: Path) -> Path:
    """The directory git runs ``repo``'s hooks from (``core.hooksPath`` respected)."""
    if not repo.exists():
        raise StoreError(f"no repository at {repo}")
    # Trusted: rev-parse starts no program a repository's configuration could name.
    result = run_git(["rev-parse", "--git-path", "hooks"], cwd=repo, trusted=True)
    found = result.stdout.decode().strip()
    return (repo / found).resolve() if not Path(found).is_absolute() else Path(found)


def _is_ours(path: Path) -> bool:
    with contextlib.suppress(OSError), open(path, "rb") as fh:
        return MARKER.encode() in fh.read(200)
    return False


@dataclass
class HookState:
    """One hook name in one hooks directory: ``installed``, our script is there (``outdated``:
    not what this gitmem installs, e.g. without python -P, so install rewrites it); ``chained``,
    an earlier hook kept as ``<name>.pre-gitmem`` runs first; ``foreign``, another hook is."""

    name: str
    path: Path
    installed: bool
    outdated: bool
    chained: bool
    foreign: bool
    role: str | None
    python: str | None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "path": str(self.path)}


def _state(directory: Path, name: str) -> HookState:
    path = directory / name
    ours = _is_ours(path)
    text = ""
    with contextlib.suppress(OSError):
        text = path.read_text(errors="replace") if ours else ""
    fields = dict(re.findall(r"(?m)^(role|python)='([^']*)'$", text))
    role, python = fields.get("role"), fields.get("python")
    try:
        current = role in ROLES and python and text == render(name, str(role), python)
    except GitmemError:
        current = False
    chained = (directory / f"{name}{CHAINED}").exists()
    foreign = path.exists() and not ours
    return HookState(name, path, ours, ours and not current, chained, foreign, role, python)


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
        paths = {"repo": str(self.repo), "hooks_dir": str(self.hooks_dir)}
        return {**asdict(self), **paths, "hooks": [h.to_dict() for h in self.hooks]}


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
        from gitmem.store.mergedriver import register_driver

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
