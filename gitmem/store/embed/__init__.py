"""Embedders: text -> unit vectors for recall, chosen only by the user's own configuration
(docs/recall.md), never by the committed ``gitmem.yaml``; nothing is downloaded at run time."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from gitmem.base import logs
from gitmem.base.errors import EmbedderError, InvalidMemoryError
from gitmem.format import schema

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

log = logs.get("gitmem.store.embed")


class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors of one fixed dimension."""

    name: str
    """Names the model: stored vectors are keyed by it."""
    dim: int

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Shape ``(len(texts), dim)``, float32, each row of norm 1 (or 0 for an empty text)."""
        ...


def _spec(config: Any) -> dict[str, Any] | None:
    """The configuration as a mapping with a provider (None: embeddings turned off)."""
    if config is False or (isinstance(config, str) and config.strip().lower() in {"none", "off"}):
        return None
    if isinstance(config, str):
        config = {"provider": config}
    if not isinstance(config, Mapping | None):
        kind = type(config).__name__
        raise EmbedderError(
            f"the embedder section must be a mapping or a provider name, not {kind}"
        )
    spec = {str(k): v for k, v in (config or {}).items()}
    spec["provider"] = str(spec.get("provider", "default")).strip().lower()
    try:  # schemas/embedder.schema.json: the options each provider takes
        schema.validate(spec, schema="embedder.schema.json", what="embedder")
    except InvalidMemoryError as exc:
        raise EmbedderError(exc.message) from None
    return None if spec["provider"] == "none" else spec


def load_embedder(config: Any) -> Embedder | None:
    """The embedder a configuration section names (None when it turns embeddings off).
    Raises EmbedderError naming what is wrong."""
    spec = _spec(config)
    if spec is None:
        return None
    provider = spec["provider"]
    if provider == "default":
        from gitmem.store.embed.static import load_default

        return load_default()
    if provider in ("openai", "ollama"):
        from gitmem.store.embed.http import HttpEmbedder

        return HttpEmbedder(spec)
    from gitmem.store.embed.local import load_local

    return load_local(spec)


_cache: dict[str, Embedder | None] = {}
_noticed: set[str] = set()
_lock = threading.Lock()


def get_embedder(gitdir: str | None = None) -> Embedder | None:
    """The embedder for the store at ``gitdir`` from the user's local configuration, cached
    per configuration; None (with one logged notice) when it cannot be loaded."""
    from gitmem.git import localconfig

    try:
        config = localconfig.load().section("embedder", gitdir=gitdir)
    except Exception as exc:  # a malformed config file: recall still works, lexically
        _notice(f"config:{exc}", f"embeddings are off: {exc}")
        return None
    key = repr(config)
    with _lock:
        if key in _cache:
            return _cache[key]
        try:
            embedder = load_embedder(config)
        except EmbedderError as exc:
            hint = f" ({exc.hint})" if exc.hint else ""
            _notice(key, f"embeddings are off, recall is lexical only: {exc}{hint}")
            embedder = None
        _cache[key] = embedder
        return embedder


def _notice(key: str, message: str) -> None:
    if key not in _noticed:
        _noticed.add(key)
        log.warning("%s", message)


def warned() -> bool:
    """Whether this process logged why embeddings are off (a failed load or configuration):
    the command line then does not print recall's shorter notice of the same thing too."""
    return bool(_noticed)


def clear_cache() -> None:
    """Forget loaded embedders and given notices (tests; a changed configuration)."""
    with _lock:
        _cache.clear()
        _noticed.clear()
