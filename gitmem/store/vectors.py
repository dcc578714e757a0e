"""Memory vectors as derived rows in the index: int8 codes per (embedder, blob), pending until
the first semantic query embeds them, searched exactly (``python -m bench.vecsearch``)."""

from __future__ import annotations

import array
import math
import sqlite3
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from gitmem.base import logs
from gitmem.base.errors import EmbedderError, IndexDamagedError
from gitmem.store.index_rows import RowChanges, chunks, marks
from gitmem.store.row_providers import RowProvider, provider_key, register

if TYPE_CHECKING:
    import numpy as np
    import pygit2  # only named: a reader of a current index never loads it
    from numpy.typing import NDArray

    from gitmem.git.db import GitDB
    from gitmem.store.embed import Embedder

log = logs.get(__name__)


class Index(Protocol):
    """What the vector rows use of :class:`gitmem.store.index.Index` (which imports them)."""

    db: GitDB

    def connect(self) -> sqlite3.Connection: ...
    def catch_up(self) -> object: ...
    def writing(self, conn: sqlite3.Connection) -> AbstractContextManager[None]: ...

VECTORS_VERSION = 8
"""Bump when the tables change: the next catch-up drops them and the next recall embeds."""
SYNC_BATCH = 1000
"""Memories embedded and written per step of :func:`sync`."""
MAX_TEXT = 8000
"""Characters of a memory handed to the embedder (its title and the start of its body)."""
RETRY_AFTER = 60.0
"""Seconds semantic recall is skipped in this process after its embedder failed."""

DDL = (
    "CREATE TABLE vector_models (id INTEGER PRIMARY KEY, model TEXT NOT NULL UNIQUE, "
    "dim INTEGER NOT NULL, gen INTEGER NOT NULL, complete INTEGER NOT NULL DEFAULT 0)",
    "CREATE TABLE vectors (id INTEGER PRIMARY KEY, model INTEGER NOT NULL, "
    "blob TEXT NOT NULL, code BLOB NOT NULL, UNIQUE (model, blob))",
    "CREATE TABLE vector_pending (blob TEXT PRIMARY KEY) WITHOUT ROWID",
    "CREATE TABLE vector_df (model INTEGER NOT NULL, token INTEGER NOT NULL, "
    "df INTEGER NOT NULL, PRIMARY KEY (model, token)) WITHOUT ROWID",
    "CREATE TABLE vector_gone (model INTEGER NOT NULL, blob TEXT NOT NULL, text TEXT NOT NULL, "
    "PRIMARY KEY (model, blob)) WITHOUT ROWID",
)
"""``vector_models.gen`` changes with every write (the search cache's key); ``vector_df``
counts in how many blobs each token occurs (a query weighs its tokens by rarity);
``vector_gone`` keeps a deleted vector's text until sync uncounts it."""


def encode(vecs: NDArray[Any]) -> list[bytes]:
    """The int8 code of each row of ``vecs`` (unit vectors, as embedders return them)."""
    import numpy as np

    matrix = np.asarray(vecs, dtype=np.float32)
    if matrix.ndim != 2:
        raise ValueError(f"vectors must be a 2-d array, not shape {matrix.shape}")
    if not np.isfinite(matrix).all():
        raise ValueError("vectors hold NaN or infinity")
    peak = np.abs(matrix).max(axis=1, keepdims=True) if matrix.shape[1] else matrix[:, :0]
    # Each row divided by its peak first: ``127 / peak`` overflows for subnormal floats.
    codes = np.rint(matrix / np.where(peak > 0, peak, 1) * 127).astype(np.int8)
    return [row.tobytes() for row in codes]


def embed_text(title: str | None, body: str) -> str:
    """The text of a memory that is embedded: its title, then its body, bounded."""
    text = f"{title}\n{body}" if title else body
    return text[:MAX_TEXT]


def _apply(conn: sqlite3.Connection, _repo: pygit2.Repository, changes: RowChanges) -> None:
    """Catch-up's part: mark pending the blobs that became current; delete the vectors of
    those that stopped being current (their text kept in ``vector_gone``). Nothing is
    embedded here: commands that never recall must not load an embedder."""
    if changes.full:  # a refill: the tables were just made, every blob is new
        conn.executemany(
            "INSERT OR IGNORE INTO vector_pending (blob) VALUES (?)",
            ((a.blob,) for a in changes.added),
        )
        return
    delta = Counter(a.blob for a in changes.added)
    delta.subtract(r.blob for r in changes.removed)
    changed = sorted(b for b, d in delta.items() if d)
    # The core rows are current: how many memories hold a blob now, and before this change.
    now: dict[str, int] = {}
    for chunk in chunks(changed):
        sql = f"SELECT blob, count(*) FROM memories WHERE blob IN ({marks(chunk)}) GROUP BY blob"
        now.update((str(r[0]), int(r[1])) for r in conn.execute(sql, chunk))
    came = [b for b in changed if now.get(b, 0) > 0 and now.get(b, 0) - delta[b] <= 0]
    went = [b for b in changed if now.get(b, 0) <= 0 and -delta[b] > 0]
    if went:
        texts = {r.blob: embed_text(r.memory.title, r.memory.body) for r in changes.removed}
        models = [int(r[0]) for r in conn.execute("SELECT id FROM vector_models")]
        conn.executemany("DELETE FROM vector_pending WHERE blob = ?", ((b,) for b in went))
        pairs = [(m, b) for m in models for b in went]
        conn.executemany(
            "INSERT OR REPLACE INTO vector_gone (model, blob, text) SELECT model, blob, ? "
            "FROM vectors WHERE model = ? AND blob = ?",
            ((texts.get(b, ""), m, b) for m, b in pairs),
        )
        conn.executemany("DELETE FROM vectors WHERE model = ? AND blob = ?", pairs)
        conn.execute("UPDATE vector_models SET gen = random()")
    conn.executemany(
        "INSERT OR IGNORE INTO vector_pending (blob) VALUES (?)", ((b,) for b in came)
    )


VECTORS = RowProvider(
    name="vectors",
    version=VECTORS_VERSION,
    tables=("vector_gone", "vector_df", "vector_pending", "vectors", "vector_models"),
    ddl=DDL,
    apply=_apply,
)
register(VECTORS)


def complete(conn: sqlite3.Connection, model: str, dim: int | None = None) -> bool:
    """Whether every current memory has a vector of ``model`` (of ``dim`` dimensions) and
    its counts are exact: :func:`nearest_in` can answer on a read-only connection."""
    row = conn.execute(
        "SELECT complete, id, dim FROM vector_models WHERE model = ?", (model,)
    ).fetchone()
    if row is None or not row[0] or dim not in (None, row[2]):
        return False
    if conn.execute("SELECT 1 FROM vector_pending LIMIT 1").fetchone() is not None:
        return False
    gone = conn.execute("SELECT 1 FROM vector_gone WHERE model = ? LIMIT 1", (row[1],))
    return gone.fetchone() is None


def _model_id(conn: sqlite3.Connection, embedder: Embedder) -> tuple[int, bool]:
    """The embedder's model row (made if new, emptied if its dimension changed under the
    same name): (id, whether it was complete)."""
    row = conn.execute(
        "SELECT id, dim, complete FROM vector_models WHERE model = ?", (embedder.name,)
    ).fetchone()
    if row is None:
        cursor = conn.execute(
            "INSERT INTO vector_models (model, dim, gen) VALUES (?, ?, random())",
            (embedder.name, embedder.dim),
        )
        return int(cursor.lastrowid or 0), False
    model_id = int(row[0])
    if int(row[1]) != embedder.dim:
        for table in ("vectors", "vector_df", "vector_gone"):
            conn.execute(f"DELETE FROM {table} WHERE model = ?", (model_id,))
        conn.execute(
            "UPDATE vector_models SET dim = ?, complete = 0 WHERE id = ?", (embedder.dim, model_id)
        )
        return model_id, False
    return model_id, bool(row[2])


def sync(index: Index, embedder: Embedder) -> int:
    """Embed the current memories that have no vector for ``embedder`` yet; returns how many:
    the pending blobs of a model that was complete, else every blob without its vector."""
    conn = index.connect()
    index.catch_up()
    if complete(conn, embedder.name, embedder.dim):
        return 0
    written = 0
    with index.writing(conn):
        model_id, was_complete = _model_id(conn, embedder)
        if was_complete:
            sql = "SELECT blob FROM vector_pending p"
        else:
            sql = "SELECT DISTINCT blob FROM memories p"
        need = [
            str(r[0])
            for r in conn.execute(
                f"{sql} WHERE NOT EXISTS (SELECT 1 FROM vectors v WHERE v.model = ? "
                "AND v.blob = p.blob) ORDER BY blob",
                (model_id,),
            )
        ]
        tokens = getattr(embedder, "token_ids", None)
        gone = conn.execute("SELECT text FROM vector_gone WHERE model = ?", (model_id,))
        if tokens is not None:
            _count(conn, model_id, (tokens(t) for (t,) in gone.fetchall()), -1)
        conn.execute("DELETE FROM vector_gone WHERE model = ?", (model_id,))
        for start in range(0, len(need), SYNC_BATCH):
            texts = _texts(conn, need[start : start + SYNC_BATCH])
            if not texts:
                continue
            batch = list(texts.values())
            vecs = embedder.embed(batch)
            if tokens is not None:
                _count(conn, model_id, (tokens(t) for t in batch), +1)
            conn.executemany(
                "INSERT INTO vectors (model, blob, code) VALUES (?, ?, ?)",
                ((model_id, blob, code) for blob, code in zip(texts, encode(vecs), strict=True)),
            )
            written += len(texts)
        if conn.execute("SELECT 1 FROM vector_pending LIMIT 1").fetchone() is not None:
            # Every other model that was complete has now missed these blobs.
            conn.execute("UPDATE vector_models SET complete = 0 WHERE id != ?", (model_id,))
            conn.execute("DELETE FROM vector_pending")
        conn.execute(
            "UPDATE vector_models SET complete = 1, gen = random() WHERE id = ?", (model_id,)
        )
    return written


def _texts(conn: sqlite3.Connection, blobs: Sequence[str]) -> dict[str, str]:
    """The embedded text of each of ``blobs`` that a current memory holds, in their order."""
    found: dict[str, str] = {}
    sql = f"SELECT blob, title, body FROM memories WHERE blob IN ({marks(blobs)})"
    for blob, title, body in conn.execute(sql, tuple(blobs)):
        found.setdefault(blob, embed_text(title, body or ""))
    return {b: found[b] for b in blobs if b in found}


def _count(
    conn: sqlite3.Connection, model_id: int, token_lists: Iterable[list[int]], sign: int
) -> None:
    """Add (or take off) each text's distinct tokens to the model's document frequencies."""
    counts: dict[int, int] = {}
    for ids in token_lists:
        for token in set(ids):
            counts[token] = counts.get(token, 0) + sign
    conn.executemany(
        "INSERT INTO vector_df (model, token, df) VALUES (?, ?, ?) "
        "ON CONFLICT(model, token) DO UPDATE SET df = df + excluded.df",
        ((model_id, token, n) for token, n in counts.items()),
    )
    if sign < 0:
        conn.execute("DELETE FROM vector_df WHERE model = ? AND df <= 0", (model_id,))


NUMPY_FROM = 20_000
"""Vectors from which a search loads numpy: below, Python's integers score them and a
one-shot ``gitmem recall`` saves numpy's import (``python -m bench.vecsearch``)."""
_OFFSET = bytes(b ^ 0x80 for b in range(256))
"""An int8 code's bytes as ``code + 128`` (0..255), so they add as unsigned fields."""
_SQUARE = [((b - 256 if b > 127 else b) ** 2).to_bytes(2, "little") for b in range(256)]
_SQUARE_LOW = bytes(q[0] for q in _SQUARE)
_SQUARE_HIGH = bytes(q[1] for q in _SQUARE)


@dataclass
class _Matrix:
    """A model's codes as searched, with what a search derives from them once."""

    gen: int
    blobs: list[str]
    dim: int
    raw: bytes
    norms: list[float] | None = None
    codes: NDArray[np.int8] | None = None
    scale: NDArray[np.float32] | None = None

    def scores(self, unit: Sequence[float]) -> list[float] | NDArray[np.float32]:
        """Each row's cosine with the unit vector ``unit`` (0 for a zero code)."""
        if _use_numpy(len(self.blobs)):
            return self._numpy_scores(unit)
        return self._integer_scores(unit)

    def _numpy_scores(self, unit: Sequence[float]) -> NDArray[np.float32]:
        import numpy as np

        if self.codes is None or self.scale is None:
            codes = np.frombuffer(self.raw, dtype=np.int8).reshape(len(self.blobs), self.dim)
            norms = np.sqrt(np.einsum("ij,ij->i", codes, codes, dtype=np.float32))
            self.scale = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
            self.codes = codes
        # einsum, not ``@``: a multi-threaded BLAS on a busy machine waits for its threads.
        query = np.asarray(unit, dtype=np.float32)
        scores: NDArray[np.float32] = np.einsum("ij,j->i", self.codes, query) * self.scale
        return scores

    def _integer_scores(self, unit: Sequence[float]) -> list[float]:
        """The dot products as exact integer sums: per dimension one big integer of the rows'
        codes (plus 128) in 64-bit fields, times the query's component in 30 bits."""
        n, dim = len(self.blobs), self.dim
        if self.norms is None:  # each row's squares, 2 bytes each, summed the same way
            low, high = self.raw.translate(_SQUARE_LOW), self.raw.translate(_SQUARE_HIGH)
            squares = 0
            wide = bytearray(8 * n)
            for j in range(dim):
                wide[0::8], wide[1::8] = low[j::dim], high[j::dim]
                squares += int.from_bytes(wide, "little")
            self.norms = [math.sqrt(s) for s in _fields(squares, n)]
        peak = max(map(abs, unit))
        step = (1 << 30) / peak
        weights = [round(x * step) for x in unit]
        shifted = self.raw.translate(_OFFSET)
        plus = minus = 0
        wide = bytearray(8 * n)
        for j, weight in enumerate(weights):
            if weight:
                wide[0::8] = shifted[j::dim]
                column = int.from_bytes(wide, "little")
                if weight > 0:
                    plus += weight * column
                else:
                    minus -= weight * column
        base = 128 * sum(weights)
        return [
            (p - m - base) / step / norm if norm else 0.0
            for p, m, norm in zip(_fields(plus, n), _fields(minus, n), self.norms, strict=True)
        ]


def _use_numpy(rows: int) -> bool:
    """Whether numpy scores ``rows`` vectors: many, or numpy is loaded already."""
    return rows >= NUMPY_FROM or "numpy" in sys.modules


def _fields(value: int, n: int) -> array.array[int]:
    """The ``n`` unsigned 64-bit fields of ``value``, lowest first."""
    out = array.array("Q")
    out.frombytes(value.to_bytes(8 * n, "little"))
    if sys.byteorder == "big":
        out.byteswap()
    return out


_matrices: dict[tuple[str, str], _Matrix] = {}
_matrices_lock = threading.Lock()


def clear_cache() -> None:
    """Forget the loaded matrices (tests; memory)."""
    with _matrices_lock:
        _matrices.clear()


def _load(conn: sqlite3.Connection, model: str) -> _Matrix | None:
    """The model's matrix, from this process's cache while its generation holds."""
    row = conn.execute(
        "SELECT id, dim, gen FROM vector_models WHERE model = ?", (model,)
    ).fetchone()
    if row is None:
        return None
    model_id, dim, gen = int(row[0]), int(row[1]), int(row[2])
    row = conn.execute("PRAGMA database_list").fetchone()
    key = ((row[2] if row else "") or f"memory:{id(conn)}", model)
    with _matrices_lock:
        cached = _matrices.get(key)
    if cached is not None and cached.gen == gen:
        return cached
    found = conn.execute(
        "SELECT blob, code FROM vectors WHERE model = ? ORDER BY blob", (model_id,)
    ).fetchall()
    try:  # the index is untrusted: a value of the wrong type or length is damage
        raw = b"".join(code for _, code in found)
    except TypeError:
        raise IndexDamagedError("a vector of the index is not a blob") from None
    if len(raw) != len(found) * dim:
        raise IndexDamagedError(f"a vector of the index is not {dim} bytes long")
    loaded = _Matrix(gen, [str(b) for b, _ in found], dim, raw)
    with _matrices_lock:
        if len(_matrices) >= 8:  # a process that opens many stores keeps a few
            _matrices.clear()
        _matrices[key] = loaded
    return loaded


def _weights(
    conn: sqlite3.Connection, model: str, tokens: Iterable[int], total: int
) -> dict[int, float] | None:
    """Each of ``tokens``' inverse document frequency among the model's ``total`` vectors;
    None when the model keeps no counts."""
    row = conn.execute(
        "SELECT max(d.token), m.id FROM vector_models m LEFT JOIN vector_df d "
        "ON d.model = m.id WHERE m.model = ?",
        (model,),
    ).fetchone()
    if row is None or row[0] is None:
        return None
    highest, model_id = int(row[0]), int(row[1])
    wanted = sorted(set(tokens))
    counts: dict[int, int] = {}
    for chunk in chunks(wanted):
        sql = f"SELECT token, df FROM vector_df WHERE model = ? AND token IN ({marks(chunk)})"
        counts.update(conn.execute(sql, (model_id, *chunk)).fetchall())
    return {
        t: max(math.log((total + 1) / (counts.get(t, 0) + 0.5)), 0.0) if t <= highest else 0.0
        for t in wanted
    }


def top_k(
    conn: sqlite3.Connection, model: str, query_vec: Sequence[float], k: int
) -> list[tuple[str, float]]:
    """The ``k`` stored blobs nearest ``query_vec`` by cosine, best first, as (blob, cosine);
    ties by blob id. Exact: every vector of the model is scored."""
    found = _load(conn, model) if k > 0 else None
    if found is None or not found.blobs:
        return []
    query = [float(x) for x in query_vec]
    if len(query) != found.dim:
        raise ValueError(f"a {len(query)}-d query for {found.dim}-d vectors")
    norm = math.sqrt(sum(x * x for x in query))
    if norm == 0 or not math.isfinite(norm):
        return []
    scores = found.scores([x / norm for x in query])
    if isinstance(scores, list):
        best = sorted(range(len(scores)), key=lambda r: (-scores[r], r))[:k]
        return [(found.blobs[r], scores[r]) for r in best]
    import numpy as np  # numpy's scores: its partition beats a sort of them all

    total = len(scores)
    if k < total:
        kth = np.partition(scores, total - k)[total - k]
        rows = np.flatnonzero(scores >= kth)  # every row tied with the k-th
    else:
        rows = np.arange(total)
    ranked = rows[np.lexsort((rows, -scores[rows]))][:k]
    return [(found.blobs[int(r)], float(scores[r])) for r in ranked]


_failed_until: dict[str, float] = {}


def nearest(index: Index, text: str, k: int, *, embedder: Embedder) -> list[tuple[int, float]]:
    """The current memories nearest ``text`` in meaning: (``memories.rowid``, cosine), best
    first, at most ``k`` blobs, after embedding what is pending. Never raises for the
    embedder's or the vector tables' failure: it logs one line and answers nothing."""
    if _failed_until.get(embedder.name, 0.0) > time.monotonic():
        return []
    try:
        try:
            sync(index, embedder)
            return nearest_in(index.connect(), text, k, embedder)
        except IndexDamagedError as exc:
            # A row gitmem did not write: the derived tables are made again.
            log.warning("index: %s; its vectors are rebuilt", exc)
            conn = index.connect()
            with index.writing(conn):  # the next catch-up makes the tables again
                key, state = provider_key(VECTORS), f"{VECTORS.version} damaged"
                conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, state))
            clear_cache()
            sync(index, embedder)
            return nearest_in(index.connect(), text, k, embedder)
    except (EmbedderError, IndexDamagedError, ValueError, sqlite3.OperationalError) as exc:
        # OperationalError: a read-only or locked index. The lexical answer stands alone.
        _failed_until[embedder.name] = time.monotonic() + RETRY_AFTER
        log.warning("semantic recall skipped for %.0f s: %s", RETRY_AFTER, exc)
        return []


def nearest_in(
    conn: sqlite3.Connection, text: str, k: int, embedder: Embedder
) -> list[tuple[int, float]]:
    """:func:`nearest` on a connection whose vectors are current (:func:`complete`): reads
    only. Raises what the embedder or SQLite raises."""
    found = _load(conn, embedder.name)  # damage raises before anything is embedded
    if found is None or not found.blobs or k <= 0:
        return []
    tokens = getattr(embedder, "token_ids", None)
    embed_tokens = getattr(embedder, "embed_tokens", None)
    query: Sequence[float]
    if tokens is not None and embed_tokens is not None:
        # Each token weighed by its rarity (``python -m bench.recall_quality``).
        ids = tokens(text)
        query = embed_tokens(ids, _weights(conn, embedder.name, ids, len(found.blobs)))
    else:
        query = embedder.embed([text])[0]
    hits = top_k(conn, embedder.name, query, k)
    by_blob: dict[str, list[int]] = {}
    blobs = [b for b, _ in hits]
    sql = f"SELECT rowid, blob FROM memories WHERE blob IN ({marks(blobs)}) ORDER BY rowid"
    for rowid, blob in conn.execute(sql, blobs):
        by_blob.setdefault(blob, []).append(int(rowid))
    return [(rowid, cosine) for blob, cosine in hits for rowid in by_blob.get(blob, [])]
