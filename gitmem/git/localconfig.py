"""The user's own, uncommitted configuration (``$GITMEM_CONFIG``, else
``$XDG_CONFIG_HOME/gitmem/config.yaml`` or ``~/.config/gitmem/config.yaml``): what decides
which code runs, which stores are trusted, or where memory text is sent never comes from a
store. Each feature reads its own section; ``stores: {<git dir>: {...}}`` wins.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gitmem.base import logs
from gitmem.base.errors import InvalidInputError, InvalidMemoryError

if TYPE_CHECKING:
    from gitmem.format.config import StoreConfig


POLICY_SECTIONS = ("secrets", "limits", "lifecycle")
"""The sections of a store's own entry that stand beside its committed gitmem.yaml."""


def config_path() -> Path:
    """Where the user's configuration file is (it need not exist)."""
    explicit = os.environ.get("GITMEM_CONFIG")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CONFIG_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".config"
    return base / "gitmem" / "config.yaml"


@dataclass(frozen=True)
class LocalConfig:
    path: Path
    data: dict[str, Any] = field(default_factory=dict)

    def section(self, name: str, *, gitdir: str | os.PathLike[str] | None = None) -> Any:
        """The value of section ``name``; a store's own entry (by git dir) wins when given."""
        entry = self.store_entry(gitdir)[1] if gitdir is not None else {}
        return entry[name] if name in entry else self.data.get(name)

    def store_entry(self, gitdir: str | os.PathLike[str]) -> tuple[str, dict[str, Any]]:
        """The key of the store at ``gitdir`` under ``stores`` and its entry ({} if none)."""
        key = str(Path(gitdir).resolve())
        stores = self.data.get("stores")
        entry = stores.get(key) if isinstance(stores, dict) else None
        return key, entry if isinstance(entry, dict) else {}


def with_store_settings(config: StoreConfig, gitdir: str | os.PathLike[str]) -> StoreConfig:
    """``config`` (a store's gitmem.yaml) with the user's own policy for the store beside it
    (``stores.<git dir>.{secrets, limits, lifecycle}``); an unreadable one gives none."""
    try:
        local = load_cached()
    except InvalidMemoryError as exc:
        logs.get("gitmem").warning("%s (its store settings are not used)", exc)
        return config.with_local({}, "")
    key, entry = local.store_entry(gitdir)
    policy = {name: entry[name] for name in POLICY_SECTIONS if name in entry}
    return config.with_local(policy, f"{local.path} under stores: {{{key}: ...}}")


def read_limit(gitdir: str | os.PathLike[str]) -> int:
    """The largest file gitmem reads from the store at ``gitdir``: the user's own body bound
    (else the built-in one) plus the front-matter bound; never the committed gitmem.yaml's."""
    from gitmem.format.config import DEFAULT_MAX_BODY_BYTES
    from gitmem.format.yamlbounds import MAX_FRONT_MATTER_BYTES

    body = DEFAULT_MAX_BODY_BYTES
    with contextlib.suppress(InvalidMemoryError, OSError, RuntimeError):
        limits = load_cached().store_entry(gitdir)[1].get("limits")
        mine = limits.get("max_body_bytes") if isinstance(limits, dict) else None
        if isinstance(mine, int) and not isinstance(mine, bool) and mine > 0:
            body = mine
    return body + MAX_FRONT_MATTER_BYTES


def load() -> LocalConfig:
    """Read the user's configuration (an empty one where the file does not exist)."""
    path = config_path()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return LocalConfig(path)
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidMemoryError(f"cannot read the gitmem configuration {path}: {exc}") from None
    # Imported here, once there is a file to parse: most commands never read the local
    # configuration, and recall reads it on every query (usually there is none).
    from gitmem.format.yamlio import load_yaml

    try:
        data, _ = load_yaml(text)
    except InvalidMemoryError as exc:
        raise InvalidMemoryError(f"{path}: {exc}") from None
    if not isinstance(data, dict | None):
        raise InvalidMemoryError(f"{path} must hold a YAML mapping")
    return LocalConfig(path, data or {})


_cache: dict[str, tuple[tuple[int, int, int], LocalConfig]] = {}


def load_cached() -> LocalConfig:
    """:func:`load`, re-read only when the file changed (git runs ask it once per call)."""
    path = config_path()
    try:
        st = path.stat()
    except OSError:
        return LocalConfig(path)
    stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
    hit = _cache.get(str(path))
    if hit is not None and hit[0] == stamp:
        return hit[1]
    config = load()
    _cache[str(path)] = (stamp, config)
    return config


def update(change: Callable[[dict[str, Any]], None]) -> None:
    """Apply ``change`` to the configuration and write it back: under a lock, renamed into
    place, owner-only (it decides what runs); a hand-written file's comments are lost."""
    import yaml

    path = config_path()
    if path.exists() and not path.is_file():
        if stat.S_ISCHR(path.stat().st_mode):
            # GITMEM_CONFIG=/dev/null says "no local configuration": nothing is recorded.
            # Writing would rename a temporary file over the device (seen: a run as root
            # turned /dev/null into a regular file, breaking every later program).
            change(dict(load().data))
            return
        raise InvalidInputError(
            f"the local configuration {path} is not a regular file; nothing was recorded",
            hint="point GITMEM_CONFIG at a file (or /dev/null for none)",
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        data = dict(load().data)
        change(data)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(
                    "# gitmem's local configuration: yours alone, never committed "
                    "(see docs/security.md).\n"
                )
                yaml.safe_dump(data, fh, sort_keys=False, allow_unicode=True)
            Path(tmp).chmod(0o600)
            Path(tmp).replace(path)
        except BaseException:
            with contextlib.suppress(OSError):
                Path(tmp).unlink()
            raise
    _cache.pop(str(path), None)
