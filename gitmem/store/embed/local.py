"""Embedders from a model already on disk (sentence-transformers, fastembed), imported only
when configured and kept offline unless ``allow_download: true``."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from gitmem.base.errors import EmbedderError

_OFFLINE_ENV = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE")


class LocalEmbedder:
    """Wraps a loaded model's encode function; rows come back L2-normalised float32."""

    def __init__(self, name: str, dim: int, encode: Any) -> None:
        self.name = name
        self.dim = dim
        self._encode = encode

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        try:
            raw = np.asarray(self._encode([str(t) for t in texts]), dtype=np.float32)
        except Exception as exc:  # the library's own errors: one line, recall goes lexical
            raise EmbedderError(f"embedder {self.name} failed: {exc}") from None
        if raw.shape != (len(texts), self.dim) or not np.isfinite(raw).all():
            raise EmbedderError(
                f"embedder {self.name} returned shape {raw.shape}, expected "
                f"({len(texts)}, {self.dim}) finite numbers"
            )
        norms = np.linalg.norm(raw, axis=1, keepdims=True)
        np.divide(raw, norms, out=raw, where=norms > 0)
        return raw


def load_local(spec: Mapping[str, Any]) -> LocalEmbedder:
    """A local embedder from a checked configuration section (schemas/embedder.schema.json)."""
    provider, model, batch = str(spec["provider"]), str(spec["model"]), int(spec.get("batch", 64))
    offline = not spec.get("allow_download", False)
    if offline:
        # Read by huggingface_hub when it is first imported: set before the import below.
        for name in _OFFLINE_ENV:
            os.environ.setdefault(name, "1")
    if provider == "sentence-transformers":
        return _sentence_transformers(model, spec, batch, offline)
    return _fastembed(model, spec, batch, offline)


def _sentence_transformers(
    model: str, spec: Mapping[str, Any], batch: int, offline: bool
) -> LocalEmbedder:
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError:
        raise EmbedderError(
            "the sentence-transformers embedder needs the sentence-transformers package",
            hint="pip install sentence-transformers (the model must already be on disk)",
        ) from None
    kwargs: dict[str, Any] = {"device": str(spec.get("device", "cpu"))}
    if offline:
        kwargs["local_files_only"] = True
    try:
        loaded = SentenceTransformer(model, **kwargs)
    except Exception as exc:
        raise EmbedderError(f"cannot load sentence-transformers model {model!r}: {exc}") from None
    dim = int(loaded.get_sentence_embedding_dimension() or 0)
    if dim <= 0:
        raise EmbedderError(f"sentence-transformers model {model!r} has no fixed dimension")

    def encode(texts: list[str]) -> Any:
        return loaded.encode(
            texts, batch_size=batch, convert_to_numpy=True, normalize_embeddings=True,
            show_progress_bar=False,
        )

    return LocalEmbedder(f"sentence-transformers:{model}", dim, encode)


def _fastembed(model: str, spec: Mapping[str, Any], batch: int, offline: bool) -> LocalEmbedder:
    try:
        from fastembed import TextEmbedding
    except ImportError:
        raise EmbedderError(
            "the fastembed embedder needs the fastembed package",
            hint="pip install fastembed (the model must already be in its cache_dir)",
        ) from None
    kwargs: dict[str, Any] = {}
    if spec.get("cache_dir"):
        kwargs["cache_dir"] = str(spec["cache_dir"])
    if offline:
        kwargs["local_files_only"] = True
    try:
        loaded = TextEmbedding(model_name=model, **kwargs)
        probe = np.asarray(list(loaded.embed(["dimension probe"])), dtype=np.float32)
    except Exception as exc:
        raise EmbedderError(f"cannot load fastembed model {model!r}: {exc}") from None
    if probe.ndim != 2 or probe.shape[0] != 1 or probe.shape[1] < 1:
        raise EmbedderError(f"fastembed model {model!r} returned shape {probe.shape}")

    def encode(texts: list[str]) -> Any:
        return list(loaded.embed(texts, batch_size=batch))

    return LocalEmbedder(f"fastembed:{model}", int(probe.shape[1]), encode)
