"""The default embedder: static token embeddings shipped inside an installed wheel.

A static embedder looks each token up in a table and averages the rows: no neural network
runs, so it needs no GPU, loads in a fraction of a second and embeds tens of thousands of
short memories a second on one core. The table is WordLlama's ``l2_supercat`` 256-d model,
which the ``wordllama`` wheel ships in its own folder (``weights/`` and ``tokenizers/``).

Only the two files are used: the ``wordllama`` package itself is never imported. Its import
configures the root logger and its loader falls back to downloading from a model hub;
reading the files directly means no code path here can reach the network, ever.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import mmap
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from gitmem.errors import EmbedderError

PACKAGE = "wordllama"
MODEL = "l2_supercat"
WEIGHTS = f"weights/{MODEL}_256.safetensors"
TOKENIZER = f"tokenizers/{MODEL}_tokenizer_config.json"
TENSOR = "embedding.weight"
MAX_TOKENS = 2048
"""Tokens of one text that count: bounds the work a huge memory costs (the average of its
first 2,048 tokens stands for it)."""
BATCH = 512
"""Texts per numpy batch: keeps the gathered token rows to a few tens of MB."""
_MAX_HEADER = 1 << 20


def package_dir(package: str | None = None) -> Path | None:
    """The installed package's folder, found without importing it (None when absent)."""
    try:
        spec = importlib.util.find_spec(package or PACKAGE)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        return Path(location)
    return None


def read_safetensor(path: Path, key: str) -> NDArray[Any]:
    """One tensor of a ``.safetensors`` file, memory-mapped (read-only, not copied).

    The format is an 8-byte little-endian header length, a JSON header naming each
    tensor's dtype, shape and byte range, then the data.
    """
    dtypes = {"F16": np.float16, "F32": np.float32, "BF16": None}
    try:
        with path.open("rb") as fh:
            (length,) = struct.unpack("<Q", fh.read(8))
            if not 0 < length <= _MAX_HEADER:
                raise EmbedderError(f"{path}: not a safetensors file (header of {length} bytes)")
            header = json.loads(fh.read(length))
            mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, struct.error, ValueError) as exc:
        raise EmbedderError(f"cannot read the embedding table {path}: {exc}") from None
    entry = header.get(key) if isinstance(header, dict) else None
    if not isinstance(entry, dict):
        raise EmbedderError(f"{path} has no tensor {key!r}")
    dtype = dtypes.get(str(entry.get("dtype")))
    shape = entry.get("shape")
    offsets = entry.get("data_offsets")
    if (
        dtype is None
        or not isinstance(shape, list)
        or len(shape) != 2
        or not isinstance(offsets, list)
        or len(offsets) != 2
    ):
        raise EmbedderError(f"{path}: tensor {key!r} is not a 2-d float16/float32 table")
    start = 8 + length + int(offsets[0])
    count = int(shape[0]) * int(shape[1])
    if start + count * np.dtype(dtype).itemsize > len(mapped):
        raise EmbedderError(f"{path} is truncated")
    table = np.frombuffer(mapped, dtype=dtype, count=count, offset=start)
    return table.reshape(int(shape[0]), int(shape[1]))


class StaticEmbedder:
    """Mean of the tokens' rows of a static embedding table, L2-normalised."""

    def __init__(self, table: NDArray[Any], tokenizer: Any, name: str) -> None:
        self.table = table
        self.tokenizer = tokenizer
        self.name = name
        self.dim = int(table.shape[1])
        self._vocab = int(table.shape[0])

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(texts), BATCH):
            chunk = [t if isinstance(t, str) else str(t) for t in texts[start : start + BATCH]]
            out[start : start + len(chunk)] = self._embed_batch(chunk)
        return out

    def _embed_batch(self, texts: list[str]) -> NDArray[np.float32]:
        encodings = self.tokenizer.encode_batch(texts, add_special_tokens=False)
        id_lists = [e.ids[:MAX_TOKENS] for e in encodings]
        lengths = np.fromiter((len(ids) for ids in id_lists), dtype=np.int64, count=len(texts))
        total = int(lengths.sum())
        result = np.zeros((len(texts), self.dim), dtype=np.float32)
        if total == 0:
            return result
        ids = np.fromiter((i for ids in id_lists for i in ids), dtype=np.int64, count=total)
        np.clip(ids, 0, self._vocab - 1, out=ids)
        rows = self.table[ids].astype(np.float32)
        nonempty = lengths > 0
        starts = (np.cumsum(lengths) - lengths)[nonempty]
        # reduceat sums each text's run of rows; an empty text has no run (it stays zero).
        sums = np.add.reduceat(rows, starts, axis=0)
        result[nonempty] = sums / lengths[nonempty, None].astype(np.float32)
        norms = np.linalg.norm(result, axis=1, keepdims=True)
        np.divide(result, norms, out=result, where=norms > 0)
        return result


def load_default() -> StaticEmbedder:
    """The default embedder from the installed ``wordllama`` wheel's own files, offline.

    Raises EmbedderError when the wheel or ``tokenizers`` is not installed or a file is
    missing; nothing is ever downloaded.
    """
    folder = package_dir()
    if folder is None:
        raise EmbedderError(
            "the default embedder needs the wordllama package, which is not installed",
            hint="pip install 'gitmem-store[embed]' (or configure another embedder)",
        )
    weights, tokenizer_file = folder / WEIGHTS, folder / TOKENIZER
    for needed in (weights, tokenizer_file):
        if not needed.is_file():
            raise EmbedderError(f"the wordllama package has no {needed.name} at {needed}")
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise EmbedderError(
            "the default embedder needs the tokenizers package, which is not installed",
            hint="pip install 'gitmem-store[embed]'",
        ) from None
    try:
        tokenizer = Tokenizer.from_file(str(tokenizer_file))
    except Exception as exc:  # the Rust side raises its own Exception type
        raise EmbedderError(f"cannot load the tokenizer {tokenizer_file}: {exc}") from None
    tokenizer.no_padding()
    tokenizer.no_truncation()
    table = read_safetensor(weights, TENSOR)
    try:
        version = importlib.metadata.version(PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    return StaticEmbedder(table, tokenizer, f"wordllama-{MODEL}-{table.shape[1]}@{version}")
