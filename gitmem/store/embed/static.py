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

import importlib.util
import itertools
import json
import mmap
import struct
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from gitmem.base.errors import EmbedderError, install_command

PACKAGE = "wordllama"
MODEL = "l2_supercat"
WEIGHTS = f"weights/{MODEL}_256.safetensors"
TOKENIZER = f"tokenizers/{MODEL}_tokenizer_config.json"
TENSOR = "embedding.weight"
MAX_TOKENS = 2048
"""Tokens of one text that count: bounds the work a huge memory costs (the average of its
first 2,048 tokens stands for it)."""
SPACE = "\u2581"
"""SentencePiece's word-boundary mark, which the tokenizer's normalizer puts for each space."""
CACHE_PIECES = 200_000
"""Distinct space-separated pieces whose token ids are kept (then the cache starts over)."""
BATCH = 512
"""Texts per numpy batch: keeps the gathered token rows to a few tens of MB."""
WIDEN_AFTER = 64
"""Texts embedded with the table as stored (float16 rows widened as gathered) before the
whole table is widened to float32 once: widening 32,000 x 256 halves costs ~15-60 ms,
more than a one-shot ``gitmem recall`` (one query, a few new memories) spends embedding,
while a catch-up of thousands of memories gathers faster from a float32 table. Either
way a text's vector is the same: its rows widen exactly and sum in the same order."""
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
        self._stored = table
        self._wide: NDArray[np.float32] | None = (
            table if table.dtype == np.float32 and table.flags.c_contiguous else None
        )
        self._narrow_texts = 0
        self.tokenizer = tokenizer
        self.name = name
        self.dim = int(table.shape[1])
        self._vocab = int(table.shape[0])
        if int(tokenizer.get_vocab_size()) > self._vocab:
            # Every id the tokenizer gives must index the table (no clipping per text).
            raise EmbedderError(
                f"tokenizer of {tokenizer.get_vocab_size()} ids for a table of {self._vocab} rows"
            )
        space = tokenizer.token_to_id(SPACE)
        # An empty piece is a space next to another space (or at an end): the token "▁".
        self._space: list[int] = [int(space)] if space is not None else []
        self._cache: dict[str, list[int]] = {"": self._space}
        # The piece cache is shared: one embed at a time (a clear mid-lookup would fail).
        self._lock = threading.Lock()

    @property
    def table(self) -> NDArray[Any]:
        """The embedding table: float32 once widened (:data:`WIDEN_AFTER`), else as stored."""
        return self._stored if self._wide is None else self._wide

    def _rows(self, index: NDArray[np.int64]) -> NDArray[np.float32]:
        """The table's rows ``index`` as float32 (widening the whole table once it pays)."""
        if self._wide is not None:
            return self._wide[index]
        rows: NDArray[np.float32] = self._stored[index].astype(np.float32)
        return rows

    def _count(self, texts: int) -> None:
        """Note ``texts`` more to embed; widen the table once enough were."""
        self._narrow_texts += texts
        if self._wide is None and self._narrow_texts > WIDEN_AFTER:
            self._wide = np.ascontiguousarray(self._stored, dtype=np.float32)

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        with self._lock:
            self._count(len(texts))
            for start in range(0, len(texts), BATCH):
                chunk = [t if isinstance(t, str) else str(t) for t in texts[start : start + BATCH]]
                out[start : start + len(chunk)] = self._embed_batch(chunk)
        return out

    def _pieces(self, texts: list[str]) -> list[list[str]]:
        """Each text's space-separated pieces, with every new piece's token ids cached.

        The tokenizer turns every space into ``▁`` and BPE-merges within the ``▁``-led
        pieces only (a pre-tokenizer split, set in load_default), so a text's ids are its
        pieces' ids in order. Pieces repeat (words), so each is tokenized once and looked up
        after: this is most of the speed.
        """
        cache = self._cache
        pieces = [t.split(" ") if t else [] for t in texts]
        missing = list({p for ps in pieces for p in ps if p not in cache})
        if missing:
            if len(cache) + len(missing) > CACHE_PIECES:
                cache.clear()
                cache[""] = self._space
                # The batch's pieces that were cached went with the rest: all are missing
                # now (else a store with more distinct words than the cache holds failed
                # every embedding with a KeyError, and recall fell back to words only).
                missing = list({p for ps in pieces for p in ps if p not in cache})
            encodings = self.tokenizer.encode_batch_fast(missing, add_special_tokens=False)
            for piece, encoding in zip(missing, encodings, strict=True):
                cache[piece] = encoding.ids
        return pieces

    def token_ids(self, text: str) -> list[int]:
        """The token ids of one text, as embed counts them (at most MAX_TOKENS)."""
        with self._lock:
            [pieces] = self._pieces([text])
            ids = itertools.chain.from_iterable(map(self._cache.__getitem__, pieces))
            return list(ids)[:MAX_TOKENS]

    def embed_weighted(self, text: str, weights: NDArray[Any]) -> NDArray[np.float32]:
        """One text's vector with each token's row scaled by ``weights[token]`` (tokens past
        the end of ``weights`` weigh 0): a query weighted by inverse document frequency."""
        ids = np.asarray(self.token_ids(text), dtype=np.int64)
        out = np.zeros(self.dim, dtype=np.float32)
        if ids.size == 0:
            return out
        known = ids < weights.shape[0]
        w = np.zeros(ids.size, dtype=np.float32)
        w[known] = weights[ids[known]]
        with self._lock:
            rows = self._rows(ids)
        out[:] = (rows * w[:, None]).sum(axis=0)
        norm = float(np.linalg.norm(out))
        if norm == 0:  # only tokens every memory has: fall back to the plain mean
            plain: NDArray[np.float32] = self.embed([text])[0]
            return plain
        out /= norm
        return out

    def embed_counting(
        self, texts: Sequence[str]
    ) -> tuple[NDArray[np.float32], NDArray[np.int64]]:
        """The vectors of ``texts`` and, per token id, in how many of them it occurs (the
        same tokens :meth:`token_ids` gives): document frequencies at no second tokenizing."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        counts = np.zeros(self._vocab, dtype=np.int64)
        with self._lock:
            self._count(len(texts))
            for start in range(0, len(texts), BATCH):
                chunk = [t if isinstance(t, str) else str(t) for t in texts[start : start + BATCH]]
                out[start : start + len(chunk)] = self._embed_batch(chunk, counts)
        return out, counts

    def _embed_batch(
        self, texts: list[str], counts: NDArray[np.int64] | None = None
    ) -> NDArray[np.float32]:
        rows_of = self._rows
        get = self._cache.__getitem__
        chain = itertools.chain.from_iterable
        result = np.zeros((len(texts), self.dim), dtype=np.float32)
        distinct: list[NDArray[np.int64]] = []
        # One text at a time: a gather and a sum per text is faster here than numpy's
        # reduceat over the batch, and a text's vector cannot depend on its batch (so
        # incremental catch-up and a full rebuild store identical vectors).
        vocab = self._vocab
        for row, pieces in enumerate(self._pieces(texts)):
            index = np.fromiter(chain(map(get, pieces)), dtype=np.int64)[:MAX_TOKENS]
            if index.size:
                result[row] = rows_of(index).sum(axis=0)
                if counts is not None:
                    distinct.append(index + row * vocab)  # (text, token) as one number
        if counts is not None and distinct:
            # One unique over the batch's (text, token) pairs: each token once per text.
            pairs = np.unique(np.concatenate(distinct))
            counts += np.bincount(pairs % vocab, minlength=vocab)[:vocab]
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
            hint=f"{install_command('embed')} (or configure another embedder)",
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
            hint=install_command("embed"),
        ) from None
    try:
        tokenizer = Tokenizer.from_file(str(tokenizer_file))
    except Exception as exc:  # the Rust side raises its own Exception type
        raise EmbedderError(f"cannot load the tokenizer {tokenizer_file}: {exc}") from None
    tokenizer.no_padding()
    tokenizer.no_truncation()
    # Split before each "▁" (the spaces, once normalised) so BPE runs per word: the same ids
    # for these SentencePiece-style tokenizers (tests/test_embed.py compares), and what lets
    # StaticEmbedder tokenize each distinct word once.
    from tokenizers import pre_tokenizers

    tokenizer.pre_tokenizer = pre_tokenizers.Split(
        pattern=SPACE, behavior="merged_with_next"
    )
    # As stored (float16, memory-mapped): widened to float32 once a caller embeds enough
    # texts for it to pay (StaticEmbedder._count).
    table = read_safetensor(weights, TENSOR)
    version = package_version(folder)
    return StaticEmbedder(table, tokenizer, f"wordllama-{MODEL}-{table.shape[1]}@{version}/mean")


def package_version(folder: Path, package: str = PACKAGE) -> str:
    """The installed version of the package in ``folder``, from its ``.dist-info`` folder's
    name beside it (``wordllama-0.4.0.post1.dist-info``): importing importlib.metadata to
    ask costs ~20 ms of every recall. Falls back to importlib.metadata when the name does
    not say (another installer's layout, two versions' folders left side by side)."""
    wanted = package.replace("-", "_").lower()
    found = []
    for entry in folder.parent.glob("*.dist-info"):
        # {name}-{version}.dist-info, both normalised: the name's own "-" are "_".
        name, _, version = entry.name.removesuffix(".dist-info").partition("-")
        if name.lower() == wanted:
            found.append(version)
    if len(found) == 1 and found[0]:
        return found[0]
    import importlib.metadata

    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"
