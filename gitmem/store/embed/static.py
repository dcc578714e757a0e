"""The default embedder: static token embeddings shipped inside an installed wheel.

A static embedder looks each token up in a table and averages the rows: no neural network,
no GPU, tens of thousands of short memories a second on one core. The table is WordLlama's
``l2_supercat`` 256-d model, read straight from the ``wordllama`` wheel's folder: the
package itself is never imported (its import configures the root logger and its loader may
download), so no code path here reaches the network. A query is embedded without numpy or
the ``tokenizers`` library (:class:`Bpe`, :mod:`struct`), whose imports would cost a
one-shot ``gitmem recall`` more than everything else; memories are embedded in batches
with both.
"""

from __future__ import annotations

import array
import bisect
import hashlib
import heapq
import importlib.util
import itertools
import json
import math
import mmap
import os
import re
import struct
import sys
import tempfile
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gitmem.base import paths
from gitmem.base.errors import EmbedderError, install_command

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

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
BPE_PIECES = 1000
"""New pieces a call tokenizes in Python at most; more load the ``tokenizers`` library,
whose load costs about as much as this many pieces in Python."""
BATCH = 512
"""Texts per numpy batch: keeps the gathered token rows to a few tens of MB."""
WIDEN_AFTER = 64
"""Texts embedded with the float16 table as stored before the whole table is widened to
float32 once: widening costs more than a one-shot recall spends embedding, and a catch-up
gathers faster from float32. A text's vector is the same either way."""
_MAX_HEADER = 1 << 20
_DTYPES = {"F16": ("e", 2), "F32": ("f", 4)}


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


@dataclass(frozen=True)
class Tensor:
    """One 2-d float tensor of a ``.safetensors`` file, memory-mapped (read-only).

    The format is an 8-byte little-endian header length, a JSON header naming each
    tensor's dtype, shape and byte range, then the data.
    """

    mapped: mmap.mmap
    rows: int
    cols: int
    dtype: str
    """``F16`` or ``F32``."""
    offset: int

    def row(self, index: int) -> tuple[float, ...]:
        """Row ``index`` as Python floats (float16 widens exactly)."""
        code, size = _DTYPES[self.dtype]
        start = self.offset + index * self.cols * size
        return struct.unpack_from(f"<{self.cols}{code}", self.mapped, start)

    def array(self) -> NDArray[Any]:
        """The whole tensor as a numpy array over the mapping (not copied)."""
        import numpy as np

        dtype = np.float16 if self.dtype == "F16" else np.float32
        count = self.rows * self.cols
        table = np.frombuffer(self.mapped, dtype=dtype, count=count, offset=self.offset)
        return table.reshape(self.rows, self.cols)


def read_safetensor(path: Path, key: str) -> Tensor:
    """Where tensor ``key`` of the ``.safetensors`` file at ``path`` lies, checked."""
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
    dtype = str(entry.get("dtype"))
    shape = entry.get("shape")
    offsets = entry.get("data_offsets")
    if (
        dtype not in _DTYPES
        or not isinstance(shape, list)
        or len(shape) != 2
        or not isinstance(offsets, list)
        or len(offsets) != 2
    ):
        raise EmbedderError(f"{path}: tensor {key!r} is not a 2-d float16/float32 table")
    start = 8 + length + int(offsets[0])
    rows, cols = int(shape[0]), int(shape[1])
    if start + rows * cols * _DTYPES[dtype][1] > len(mapped):
        raise EmbedderError(f"{path} is truncated")
    return Tensor(mapped, rows, cols, dtype, start)


class Bpe:
    """The shipped tokenizer's BPE of one space-free piece, in Python, exactly.

    The tokenizer (a SentencePiece-style BPE converted for the ``tokenizers`` library)
    splits its special tokens out, puts ``▁`` before the rest, splits before each ``▁``
    (load_default sets that), and merges each part's characters (bytes for a character
    not in the vocabulary) pair by pair, the best-ranked pair first, leftmost on a tie.
    Its merges are every split of a token into two tokens, ranked by the merged token's
    id, then the halves' ids, but for a tail listed apart (:func:`build_bpe` checks this),
    so the vocabulary alone ranks them: no 61,000-entry merge table to load.
    """

    def __init__(
        self,
        pieces: list[str],
        ids: Sequence[int],
        tail: list[tuple[str, str]],
        specials: dict[str, int],
    ) -> None:
        self.pieces = pieces
        """The vocabulary's texts in code point order (bisected: a few ms to load, where a
        dict of 32,000 would take tens), and ``ids`` their token ids."""
        self.ids = ids
        self.tail = tail
        """The merges ranked after every other, in their order."""
        self.specials = specials
        self.size = len(pieces)
        last = self.size**3
        self._tail = {pair: last + rank for rank, pair in enumerate(tail)}
        ordered = sorted(specials, key=len, reverse=True)
        self._split = re.compile("(" + "|".join(map(re.escape, ordered)) + ")") if ordered else None

    def id(self, text: str) -> int | None:
        """The token id of ``text``, None when it is not a token."""
        at = bisect.bisect_left(self.pieces, text)
        return self.ids[at] if at < self.size and self.pieces[at] == text else None

    def encode(self, piece: str) -> list[int]:
        out: list[int] = []
        parts = self._split.split(piece) if self._split is not None else [piece]
        for i, part in enumerate(parts):
            if i % 2:
                out.append(self.specials[part])
            elif part:
                for word in re.split(f"(?={SPACE})", SPACE + part.replace(" ", SPACE)):
                    if word:
                        out.extend(self._merge(word))
        return out

    def _rank(self, left: str, right: str) -> int | None:
        merged = self.id(left + right)
        if merged is None:
            return None
        tail = self._tail.get((left, right))
        if tail is not None:
            return tail
        size = self.size
        return (merged * size + self.ids_of(left)) * size + self.ids_of(right)

    def ids_of(self, token: str) -> int:
        found = self.id(token)
        assert found is not None, token
        return found

    def _merge(self, word: str) -> list[int]:
        """The ids of one ``▁``-led word: the tokenizers library's BPE, merge for merge."""
        symbols: list[str] = []  # "" once merged into the symbol on its left
        for char in word:
            if self.id(char) is not None:
                symbols.append(char)
            else:  # byte fallback: every byte has its token (build_bpe checks)
                symbols.extend(f"<0x{b:02X}>" for b in char.encode("utf-8", "surrogatepass"))
        after = [*range(1, len(symbols)), -1]
        before = list(range(-1, len(symbols) - 1))
        heap = [
            (rank, i)
            for i in range(len(symbols) - 1)
            if (rank := self._rank(symbols[i], symbols[i + 1])) is not None
        ]
        heapq.heapify(heap)
        while heap:
            rank, i = heapq.heappop(heap)
            j = after[i]
            if not symbols[i] or j == -1 or self._rank(symbols[i], symbols[j]) != rank:
                continue  # a pair that changed since it was queued
            symbols[i] += symbols[j]
            symbols[j] = ""
            after[i] = k = after[j]
            if k != -1:
                before[k] = i
                if (r := self._rank(symbols[i], symbols[k])) is not None:
                    heapq.heappush(heap, (r, i))
            h = before[i]
            if h != -1 and (r := self._rank(symbols[h], symbols[i])) is not None:
                heapq.heappush(heap, (r, h))
        return [self.ids_of(s) for s in symbols if s]


_BPE_FORMAT = "gitmem-bpe 1"
_NORMALIZER = {
    "type": "Sequence",
    "normalizers": [
        {"type": "Prepend", "prepend": SPACE},
        {"type": "Replace", "pattern": {"String": " "}, "content": SPACE},
    ],
}


def build_bpe(config: Any) -> Bpe | None:
    """:class:`Bpe` for a tokenizer's configuration (its JSON, parsed), or None when the
    tokenizer is not of the kind it reproduces exactly."""
    model = config.get("model") if isinstance(config, dict) else None
    if (
        not isinstance(model, dict)
        or model.get("type") != "BPE"
        or model.get("byte_fallback") is not True
        or model.get("ignore_merges")
        or model.get("dropout") is not None
        or model.get("continuing_subword_prefix")
        or model.get("end_of_word_suffix")
        or config.get("normalizer") != _NORMALIZER
        or config.get("pre_tokenizer") is not None
    ):
        return None
    vocab, merges, added = model.get("vocab"), model.get("merges"), config.get("added_tokens")
    if not isinstance(vocab, dict) or not isinstance(merges, list) or not isinstance(added, list):
        return None
    pieces = sorted(vocab, key=vocab.__getitem__)
    if [vocab[p] for p in pieces] != list(range(len(pieces))) or any("\n" in p for p in pieces):
        return None
    if any(f"<0x{b:02X}>" not in vocab for b in range(256)):
        return None
    specials: dict[str, int] = {}
    for token in added:
        if not isinstance(token, dict) or vocab.get(token.get("content")) != token.get("id"):
            return None
        if any(token.get(k) for k in ("normalized", "lstrip", "rstrip", "single_word")):
            return None
        specials[token["content"]] = token["id"]
    pairs: list[tuple[str, str]] = []
    for merge in merges:
        pair = merge.split(" ") if isinstance(merge, str) else merge
        if not isinstance(pair, list) or len(pair) != 2:
            return None
        pairs.append((str(pair[0]), str(pair[1])))
    splits = {
        (piece[:k], piece[k:])
        for piece in pieces
        for k in range(1, len(piece))
        if piece[:k] in vocab and piece[k:] in vocab
    }
    if len(set(pairs)) != len(pairs) or set(pairs) != splits:
        return None
    keys = [(vocab[a + b], vocab[a], vocab[b]) for a, b in pairs]
    ordered = 1
    while ordered < len(keys) and keys[ordered - 1] < keys[ordered]:
        ordered += 1
    texts = sorted(pieces)
    return Bpe(texts, [vocab[p] for p in texts], pairs[ordered:], specials)


_loaded: dict[str, Bpe] = {}


def load_bpe(tokenizer_file: Path) -> Bpe | None:
    """:class:`Bpe` of the tokenizer at ``tokenizer_file``: from this process's memory, the
    user's cache folder (a few ms), or else built from the file (a few hundred ms, once)
    and cached. None when it cannot be (the tokenizer is of another kind, or the cache
    folder cannot be written: building it every time costs more than the library)."""
    try:
        st = tokenizer_file.stat()
    except OSError:
        return None
    key = f"{_BPE_FORMAT}\0{tokenizer_file.resolve()}\0{st.st_size}\0{st.st_mtime_ns}"
    if key in _loaded:
        return _loaded[key]
    folder = paths.user_dir("cache")
    cached = folder / f"bpe-{hashlib.sha256(key.encode()).hexdigest()[:24]}"
    bpe = _read_bpe(cached, key)
    if bpe is None:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            if not os.access(folder, os.W_OK):
                return None
            bpe = build_bpe(json.loads(tokenizer_file.read_bytes()))
        except (OSError, ValueError):
            return None
        if bpe is None:
            return None
        # The key, the tail and specials as JSON, a line each; the ids (4 bytes each); the
        # pieces, one a line (build_bpe refuses a piece with a newline).
        fields = {"size": bpe.size, "tail": bpe.tail, "specials": bpe.specials}
        ids = array.array("I", bpe.ids)
        if sys.byteorder == "big":
            ids.byteswap()
        head = f"{key}\n{json.dumps(fields)}\n".encode()
        _write_atomically(cached, head + ids.tobytes() + "\n".join(bpe.pieces).encode())
    _loaded[key] = bpe
    return bpe


def _read_bpe(cached: Path, key: str) -> Bpe | None:
    """The :class:`Bpe` :func:`load_bpe` saved at ``cached`` for ``key``, else None."""
    try:
        line, meta, rest = cached.read_bytes().split(b"\n", 2)
        saved = json.loads(meta)
        size = saved["size"]
        ids = array.array("I")
        ids.frombytes(rest[: 4 * size])
        pieces = rest[4 * size :].decode().split("\n")
        if line.decode() != key or not len(ids) == len(pieces) == size:
            return None
        if sys.byteorder == "big":
            ids.byteswap()
        return Bpe(pieces, ids, [(a, b) for a, b in saved["tail"]], saved["specials"])
    except (OSError, UnicodeDecodeError, ValueError, LookupError, TypeError):
        return None


def _write_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file; a cache not written is no error."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except OSError:
        pass


class StaticEmbedder:
    """Mean of the tokens' rows of a static embedding table, L2-normalised.

    What a call needs is loaded on its first use: the tokenizer's vocabulary for a few
    new pieces, the ``tokenizers`` library for many, numpy for :meth:`embed`."""

    def __init__(self, table: Tensor, tokenizer_file: Path, name: str) -> None:
        self._tensor = table
        self._tokenizer_file = tokenizer_file
        self._tokenizer: Any = None
        self._bpe: Bpe | bool | None = False  # False: not loaded yet
        self._stored: NDArray[Any] | None = None
        self._wide: NDArray[np.float32] | None = None
        self._narrow_texts = 0
        self.name = name
        self.dim = table.cols
        self._vocab = table.rows
        self._space: list[int] | None = None
        self._cache: dict[str, list[int]] = {}
        # The piece cache is shared: one embed at a time (a clear mid-lookup would fail).
        self._lock = threading.Lock()

    @property
    def table(self) -> NDArray[Any]:
        """The embedding table: float32 once widened (:data:`WIDEN_AFTER`), else as stored."""
        if self._wide is not None:
            return self._wide
        if self._stored is None:
            self._stored = self._tensor.array()
            if self._stored.dtype.name == "float32":
                self._wide = self._stored
        return self._stored

    @property
    def tokenizer(self) -> Any:
        """The ``tokenizers`` library's tokenizer of the shipped file, loaded on first use."""
        if self._tokenizer is None:
            self._tokenizer = _load_tokenizer(self._tokenizer_file, self._vocab)
        return self._tokenizer

    def _rows(self, index: NDArray[np.int64]) -> NDArray[np.float32]:
        """The table's rows ``index`` as float32 (widening the whole table once it pays)."""
        import numpy as np

        table = self.table
        if self._wide is not None:
            return self._wide[index]
        rows: NDArray[np.float32] = table[index].astype(np.float32)
        return rows

    def _count(self, texts: int) -> None:
        """Note ``texts`` more to embed; widen the table once enough were."""
        import numpy as np

        self._narrow_texts += texts
        if self._wide is None and self._narrow_texts > WIDEN_AFTER:
            self._wide = np.ascontiguousarray(self.table, dtype=np.float32)

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        import numpy as np

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        with self._lock:
            self._count(len(texts))
            for start in range(0, len(texts), BATCH):
                chunk = [t if isinstance(t, str) else str(t) for t in texts[start : start + BATCH]]
                out[start : start + len(chunk)] = self._embed_batch(chunk)
        return out

    def _python_bpe(self) -> Bpe | None:
        """The tokenizer in Python (:class:`Bpe`), loaded on first use; None when the
        shipped tokenizer is not one it reproduces."""
        if self._bpe is False:
            bpe = load_bpe(self._tokenizer_file)
            self._bpe = bpe if bpe is not None and bpe.size <= self._vocab else None
        return self._bpe if isinstance(self._bpe, Bpe) else None

    def _encode(self, pieces: list[str]) -> list[list[int]]:
        """The token ids of each of ``pieces``: in Python for a few, else by the library
        (once loaded, always: it is the faster)."""
        if self._tokenizer is None and len(pieces) <= BPE_PIECES:
            bpe = self._python_bpe()
            if bpe is not None:
                return [bpe.encode(p) for p in pieces]
        return [e.ids for e in self.tokenizer.encode_batch_fast(pieces, add_special_tokens=False)]

    def _space_ids(self) -> list[int]:
        """The ids of an empty piece (a space next to another, or at an end): ``▁``."""
        if self._space is None:
            bpe = self._python_bpe() if self._tokenizer is None else None
            space = bpe.id(SPACE) if bpe is not None else self.tokenizer.token_to_id(SPACE)
            self._space = [int(space)] if space is not None else []
        return self._space

    def _pieces(self, texts: list[str]) -> list[list[str]]:
        """Each text's space-separated pieces, with every new piece's token ids cached: the
        tokenizer merges only within ``▁``-led pieces, so a text's ids are its pieces' ids
        in order, and pieces (words) repeat."""
        cache = self._cache
        cache.setdefault("", self._space_ids())
        pieces = [t.split(" ") if t else [] for t in texts]
        missing = list({p for ps in pieces for p in ps if p not in cache})
        if missing:
            if len(cache) + len(missing) > CACHE_PIECES:
                cache.clear()
                cache[""] = self._space_ids()
                # The batch's pieces that were cached went with the rest: all are missing
                # now (else a store with more distinct words than the cache holds failed
                # every embedding with a KeyError, and recall fell back to words only).
                missing = list({p for ps in pieces for p in ps if p not in cache})
            for piece, ids in zip(missing, self._encode(missing), strict=True):
                cache[piece] = ids
        return pieces

    def token_ids(self, text: str) -> list[int]:
        """The token ids of one text, as embed counts them (at most MAX_TOKENS)."""
        with self._lock:
            [pieces] = self._pieces([text])
            ids = itertools.chain.from_iterable(map(self._cache.__getitem__, pieces))
            return list(ids)[:MAX_TOKENS]

    def embed_tokens(
        self, ids: Iterable[int], weights: Mapping[int, float] | None = None
    ) -> list[float]:
        """The unit vector of tokens ``ids`` (:meth:`token_ids`), each row scaled by its
        ``weights`` (a token it lacks weighs 0) or, without weights, their plain mean; in
        Python, for a query. Weights that leave nothing give the plain mean."""
        tokens = list(ids)
        factors: dict[int, float] = {}
        for token in tokens:
            weight = 1.0 if weights is None else weights.get(token, 0.0)
            factors[token] = factors.get(token, 0.0) + weight
        total = [0.0] * self.dim
        for token, factor in factors.items():
            if factor:
                row = self._tensor.row(token)
                total = [t + factor * x for t, x in zip(total, row, strict=True)]
        norm = math.sqrt(sum(t * t for t in total))
        if norm == 0:
            return total if weights is None else self.embed_tokens(tokens)
        return [t / norm for t in total]

    def embed_counting(
        self, texts: Sequence[str]
    ) -> tuple[NDArray[np.float32], NDArray[np.int64]]:
        """The vectors of ``texts`` and, per token id, in how many of them it occurs (the
        same tokens :meth:`token_ids` gives): document frequencies at no second tokenizing."""
        import numpy as np

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
        import numpy as np

        rows_of = self._rows
        pieces_of = self._pieces(texts)
        get = self._cache.__getitem__
        chain = itertools.chain.from_iterable
        result = np.zeros((len(texts), self.dim), dtype=np.float32)
        distinct: list[NDArray[np.int64]] = []
        # One text at a time: a gather and a sum per text is faster here than numpy's
        # reduceat over the batch, and a text's vector cannot depend on its batch (so
        # incremental catch-up and a full rebuild store identical vectors).
        vocab = self._vocab
        for row, pieces in enumerate(pieces_of):
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


def _load_tokenizer(tokenizer_file: Path, rows: int) -> Any:
    """The ``tokenizers`` library's tokenizer of ``tokenizer_file``, split before each ``▁``
    so BPE runs per word: the same ids for these SentencePiece-style tokenizers
    (tests/test_embed.py compares), and what lets StaticEmbedder tokenize each distinct
    word once."""
    try:
        from tokenizers import Tokenizer, pre_tokenizers
    except ImportError:
        raise EmbedderError(
            "the default embedder needs the tokenizers package, which is not installed",
            hint=install_command("embed"),
        ) from None
    try:
        tokenizer = Tokenizer.from_file(str(tokenizer_file))
    except Exception as exc:  # the Rust side raises its own Exception type
        raise EmbedderError(f"cannot load the tokenizer {tokenizer_file}: {exc}") from None
    if int(tokenizer.get_vocab_size()) > rows:
        # Every id the tokenizer gives must index the table (no clipping per text).
        raise EmbedderError(
            f"tokenizer of {tokenizer.get_vocab_size()} ids for a table of {rows} rows"
        )
    tokenizer.no_padding()
    tokenizer.no_truncation()
    tokenizer.pre_tokenizer = pre_tokenizers.Split(pattern=SPACE, behavior="merged_with_next")
    return tokenizer


def load_default() -> StaticEmbedder:
    """The default embedder from the installed ``wordllama`` wheel's own files, offline.

    Raises EmbedderError when the wheel is not installed or a file is missing (the
    ``tokenizers`` library, when a call needs it); nothing is ever downloaded.
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
    # As stored (float16, memory-mapped): widened to float32 once a caller embeds enough
    # texts for it to pay (StaticEmbedder._count).
    table = read_safetensor(weights, TENSOR)
    version = package_version(folder)
    return StaticEmbedder(table, tokenizer_file, f"wordllama-{MODEL}-{table.cols}@{version}/mean")


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
