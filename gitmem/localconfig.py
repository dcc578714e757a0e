"""The user's own, uncommitted configuration.

Everything a store holds is shared with whoever can push to it, so nothing that decides
what code runs, which stores are trusted, or where memory text is sent may come from the
store. Those settings live here, in a file only the user writes:

``$GITMEM_CONFIG``, else ``$XDG_CONFIG_HOME/gitmem/config.yaml``, else
``~/.config/gitmem/config.yaml``.

The file is a YAML mapping of named sections (``trusted_stores``, ``rules``, ``jobs``,
``embedder``, ...); each feature reads its own section. Per-store settings sit under
``stores: {<absolute git dir>: {<section>: ...}}`` and win over the top-level section.
A missing file is an empty configuration; a malformed one is a clear error naming the file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import InvalidMemoryError

__all__ = ["LocalConfig", "config_path", "load"]


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
        if gitdir is not None:
            stores = self.data.get("stores")
            if isinstance(stores, dict):
                key = str(Path(gitdir).resolve())
                entry = stores.get(key)
                if isinstance(entry, dict) and name in entry:
                    return entry[name]
        return self.data.get(name)


def load() -> LocalConfig:
    """Read the user's configuration (an empty one where the file does not exist)."""
    # Imported here: most commands never read the local configuration.
    from .codec import load_yaml

    path = config_path()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return LocalConfig(path)
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidMemoryError(f"cannot read the gitmem configuration {path}: {exc}") from None
    try:
        data, _ = load_yaml(text)
    except InvalidMemoryError as exc:
        raise InvalidMemoryError(f"{path}: {exc}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise InvalidMemoryError(f"{path} must hold a YAML mapping")
    return LocalConfig(path, data)
