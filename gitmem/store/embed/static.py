"""The default embedder: the mean of the tokens' rows of WordLlama's ``l2_supercat`` 256-d
static table, read from the installed ``wordllama`` wheel without importing it (its loader
may download). A query's vector is summed in Python (numpy's import would cost a one-shot
``gitmem recall`` more); memories are embedded in numpy batches."""

from __future__ import annotations

import importlib.util
import itertools
import json
import math
import mmap
import struct
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
"""Tokens of one text that count: bounds the work a huge memory costs."""
SPACE = "\u2581"
"""SentencePiece's word-boundary mark, put for each space."""
CACHE_PIECES = 200_000
"""Distinct space-separated pieces whose token ids are kept (then the cache starts over)."""
BATCH = 512
"""Texts per numpy batch: keeps the gathered token rows to a few tens of MB."""
WIDEN_AFTER = 64
"""Texts embedded from the float16 table as stored before it is widened to float32 once:
widening costs more than embedding a few texts, and gathers twice as fast after."""
_MAX_HEADER = 1 << 20
_DTYPES = {"F16": ("e", 2), "F32": ("f", 4)}


def package_dir(package: str | None = None) -> Path | None:
    """The installed package's folder, found without importing it (None when absent)."""
    try:
        spec = importlib.util.find_spec(package or PACKAGE)
    except (ImportError, ValueError):
        return None
    locations = spec.submodule_search_locations if spec is not None else None
    return Path(next(iter(locations))) if locations else None


@dataclass(frozen=True)
class Tensor:
    """One 2-d float tensor of a ``.safetensors`` file (an 8-byte header length, a JSON
    header naming each tensor's dtype, shape and byte range, the data), memory-mapped."""

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
    try:
        entry = header[key]
        dtype, (rows, cols), (offset, _) = entry["dtype"], entry["shape"], entry["data_offsets"]
        start, size = 8 + length + int(offset), _DTYPES[dtype][1]
        rows, cols = int(rows), int(cols)
    except (KeyError, TypeError, ValueError):
        raise EmbedderError(f"{path}: no tensor {key!r} as a 2-d float16/float32 table") from None
    if start + rows * cols * size > len(mapped):
        raise EmbedderError(f"{path} is truncated")
    return Tensor(mapped, rows, cols, dtype, start)


class StaticEmbedder:
    """Mean of the tokens' rows of a static embedding table, L2-normalised. The tokenizer
    and numpy are loaded on first use."""

    def __init__(self, table: Tensor, tokenizer_file: Path, name: str) -> None:
        self._tensor = table
        self._tokenizer_file = tokenizer_file
        self._tokenizer: Any = None
        self._wide: NDArray[np.float32] | None = None
        self._narrow_texts = 0
        self.name = name
        self.dim = table.cols
        self._vocab = table.rows
        self._cache: dict[str, list[int]] = {}
        # The piece cache is shared: one embed at a time (a clear mid-lookup would fail).
        self._lock = threading.Lock()

    @property
    def tokenizer(self) -> Any:
        """The ``tokenizers`` library's tokenizer of the shipped file, loaded on first use."""
        if self._tokenizer is None:
            self._tokenizer = _load_tokenizer(self._tokenizer_file, self._vocab)
        return self._tokenizer

    def _rows(self, index: NDArray[np.int64]) -> NDArray[np.float32]:
        """The table's rows ``index`` as float32 (from the widened table once there is one)."""
        import numpy as np

        if self._wide is not None:
            return self._wide[index]
        rows: NDArray[np.float32] = self._tensor.array()[index].astype(np.float32)
        return rows

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        import numpy as np

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        with self._lock:
            self._narrow_texts += len(texts)
            if self._wide is None and self._narrow_texts > WIDEN_AFTER:
                self._wide = np.ascontiguousarray(self._tensor.array(), dtype=np.float32)
            for start in range(0, len(texts), BATCH):
                chunk = [t if isinstance(t, str) else str(t) for t in texts[start : start + BATCH]]
                out[start : start + len(chunk)] = self._embed_batch(chunk)
        return out

    def _space_ids(self) -> list[int]:
        """The ids of an empty piece (a space next to another, or at an end): ``▁``."""
        space = self.tokenizer.token_to_id(SPACE)
        return [int(space)] if space is not None else []

    def _pieces(self, texts: list[str]) -> list[list[str]]:
        """Each text's space-separated pieces, every new piece's token ids cached: the
        tokenizer merges only within ``▁``-led pieces, and pieces (words) repeat."""
        cache = self._cache
        cache.setdefault("", self._space_ids())
        pieces = [t.split(" ") if t else [] for t in texts]
        missing = list({p for ps in pieces for p in ps if p not in cache})
        if missing:
            if len(cache) + len(missing) > CACHE_PIECES:
                cache.clear()
                cache[""] = self._space_ids()
                # The batch's pieces that were cached went with the rest.
                missing = list({p for ps in pieces for p in ps if p not in cache})
            encoded = self.tokenizer.encode_batch_fast(missing, add_special_tokens=False)
            for piece, each in zip(missing, encoded, strict=True):
                cache[piece] = each.ids
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
        """The unit vector of tokens ``ids``, each row scaled by its ``weights`` (missing: 0;
        none, or all 0: the plain mean), in Python, for a query."""
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

    def _embed_batch(self, texts: list[str]) -> NDArray[np.float32]:
        import numpy as np

        get = self._cache.__getitem__
        chain = itertools.chain.from_iterable
        result = np.zeros((len(texts), self.dim), dtype=np.float32)
        # One text at a time: faster than numpy's reduceat over the batch, and a text's
        # vector cannot depend on its batch (catch-up and rebuild store the same vectors).
        for row, pieces in enumerate(self._pieces(texts)):
            index = np.fromiter(chain(map(get, pieces)), dtype=np.int64)[:MAX_TOKENS]
            if index.size:
                result[row] = self._rows(index).sum(axis=0)
        norms = np.linalg.norm(result, axis=1, keepdims=True)
        np.divide(result, norms, out=result, where=norms > 0)
        return result


def _load_tokenizer(tokenizer_file: Path, rows: int) -> Any:
    """The ``tokenizers`` library's tokenizer of ``tokenizer_file``, split before each ``▁``
    so BPE runs per word (the same ids: tests/test_embed.py compares)."""
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
    Raises EmbedderError when the wheel or a file is missing; nothing is downloaded."""
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
    table = read_safetensor(weights, TENSOR)
    version = package_version(folder)
    return StaticEmbedder(table, tokenizer_file, f"wordllama-{MODEL}-{table.cols}@{version}/mean")


def package_version(folder: Path, package: str = PACKAGE) -> str:
    """The installed version of the package in ``folder``, from its ``.dist-info`` folder's
    name beside it (importing importlib.metadata costs ~20 ms of every recall), else from
    importlib.metadata."""
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
