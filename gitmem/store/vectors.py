"""Memory vectors as derived rows in the index: compact codes and brute-force top-k.

A vector is stored per (embedder name, blob id): a memory's text is its blob, so an edit
gives a new blob and a new vector, an unchanged memory keeps its own across commits, and
nothing is ever stored in the git tree. Vectors are written by :func:`sync` (the blobs the
index's catch-up marked pending), many to a record of one list (:data:`SCHEMA`), and thrown
away with the index on a rebuild.

Codes are at most 300 bytes a memory (docs/recall.md has the measured recall cost of each):

* ``int8`` (dimensions up to 299): one signed byte a dimension, scaled so the largest
  component is +-127. Cosine on the decoded vector.
* ``int4`` (up to 598): two dimensions a byte.
* ``binary`` (larger): the sign bit of each dimension (up to 2,392); cosine on the +-1
  vector, which for sign codes ranks as Hamming similarity does.

The first byte of a code names its kind, so a reader never guesses. ``top_k`` decodes a
model's codes once into a float32 matrix kept per database and model (reloaded when its
generation counter moves: any write bumps it) and ranks by one matrix-vector product.
"""

from __future__ import annotations

import math
import sqlite3
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gitmem.base import logs
from gitmem.base.errors import IndexDamagedError
from gitmem.store.providers import RowProvider, register
from gitmem.store.rows import RowChanges

if TYPE_CHECKING:
    import numpy as np
    import pygit2  # only named: a reader of a current index never loads it
    from numpy.typing import NDArray

    from gitmem.store.embed import Embedder
    from gitmem.store.index import Index

log = logs.get(__name__)

__all__ = [
    "MAX_CODE_BYTES",
    "SCHEMA",
    "decode",
    "encode",
    "ensure_schema",
    "missing",
    "prune",
    "remove",
    "store_vectors",
    "top_k",
]

MAX_CODE_BYTES = 300
INT8, INT4, BINARY = 1, 2, 3
ZERO = 0x80
"""Header flag: the vector was all zeros."""
_KINDS = {"int8": INT8, "int4": INT4, "binary": BINARY}
_CHUNK = 500
"""Blob ids per ``IN (...)`` query (SQLite's variable limit is far above it)."""

SCHEMA = """
CREATE TABLE IF NOT EXISTS vector_models (
    id INTEGER PRIMARY KEY,
    model TEXT NOT NULL UNIQUE,
    dim INTEGER NOT NULL,
    gen INTEGER NOT NULL,
    complete INTEGER NOT NULL DEFAULT 0,
    n INTEGER NOT NULL DEFAULT 0,
    trained INTEGER NOT NULL DEFAULT 0,
    lists_id INTEGER NOT NULL DEFAULT 0,
    live INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS vectors (
    id INTEGER PRIMARY KEY,
    keys BLOB NOT NULL,
    codes BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS vector_lists (
    model INTEGER NOT NULL,
    list INTEGER NOT NULL,
    centroid BLOB NOT NULL,
    PRIMARY KEY (model, list)
);
"""
"""A model is a small integer and a blob id its 20 raw bytes, not 40 hex digits.

A row of ``vectors`` is a **record** of up to :func:`record_capacity` vectors of one list:
their blob keys packed in ``keys`` (:func:`_pack_keys`) and their codes concatenated in
``codes``, in the same order. A record's ``id`` (its rowid) is its model, its list and its
place in the list (:func:`row_id`): the records of a list are one contiguous range of
rowids, so a query reads only the lists it probes, each as one range scan, and a list's
vectors are its records' in rowid order. Past :data:`IVF_FROM` vectors a vector's list is
the nearest of the model's centroids (``vector_lists``, trained when the model held
``trained`` vectors; ``lists_id`` names that training, 0 for none); below that every vector
is in list 0 and search is exact.

A model's ``n`` counts the vectors its records hold, ``live`` the blobs its document
frequencies count (every current memory's, once sync has run). They differ by the rows
catch-up no longer deletes (provider version 7): a blob no memory holds any more keeps its
vector until the next :func:`train` or compaction writes the lists again (search skips it),
and a blob that came back meanwhile may hold two (search counts it once).

Why records (version 7) and not a row a vector (version 6, a rowid table with a blob index
on 8-byte prefixes): a 4 KiB leaf held 14 rows of a 257-byte code, a 20-byte key and ~14
bytes of SQLite's, 293 bytes a memory, and the blob index 18 more; a record sized to fill
its pages (:func:`record_capacity`) costs the 277 bytes of a code and its key, plus a few a
record. Nothing finds a vector by its blob any more: catch-up does not delete, sync embeds
what ``vector_pending`` names, and :func:`missing` reads the keys of every record (a model
that missed changes, only).

``vector_lists`` is a rowid table: a 256-d centroid is 1,024 bytes, over what a WITHOUT
ROWID row keeps on its page (~1,000 bytes of a 4 KiB page), so each spilled into a page of
its own, mostly empty (30 bytes a memory at 100k); a rowid table keeps three on a page."""


RECORD = (
    "id, CASE WHEN typeof(keys) = 'blob' THEN keys END, "
    "CASE WHEN typeof(codes) = 'blob' THEN codes END"
)
"""A record's columns as read: a value that is not a blob (the index is untrusted: text of
no valid UTF-8 would fail the read itself) comes back as None, which :func:`_checked`
refuses."""
SEQ_BITS = 20
"""Bits of a record id for its place in its list: a list holds at most 2**20 records (a
write that would number past it renumbers the model, :func:`_rewrite`)."""
LIST_BITS = 16
"""Bits for the list (at most 65,536 lists: :func:`list_count` of a billion vectors)."""
KEY_BYTES = 20
"""A git blob id as stored (:func:`_key`)."""


def row_id(model_id: int, lst: int, seq: int = 0) -> int:
    """The rowid of the ``seq``-th record of list ``lst`` of model ``model_id`` (model ids
    start at 1)."""
    return ((model_id - 1) << (LIST_BITS + SEQ_BITS)) | (lst << SEQ_BITS) | seq


def _model_range(model_id: int) -> tuple[int, int]:
    """The first and last rowid a model's records may have."""
    low = row_id(model_id, 0)
    return low, low + (1 << (LIST_BITS + SEQ_BITS)) - 1


def _list_range(model_id: int, lst: int) -> tuple[int, int]:
    low = row_id(model_id, lst)
    return low, low + (1 << SEQ_BITS) - 1


def list_sql(column: str = "id") -> str:
    """SQL for the list of a ``vectors`` record from its rowid ``column``."""
    return f"(({column} >> {SEQ_BITS}) & {(1 << LIST_BITS) - 1})"


def model_sql(column: str = "id") -> str:
    """SQL for the model id of a ``vectors`` record from its rowid ``column``."""
    return f"(({column} >> {LIST_BITS + SEQ_BITS}) + 1)"


def ensure_schema(conn: sqlite3.Connection) -> None:
    """Create the vector tables if they are not there (idempotent)."""
    conn.executescript(SCHEMA)


# -- codes ---------------------------------------------------------------------------------


def kind_for(dim: int) -> str:
    """The most precise code that fits MAX_CODE_BYTES (one byte is the header)."""
    budget = MAX_CODE_BYTES - 1
    if dim <= budget:
        return "int8"
    if dim <= 2 * budget:
        return "int4"
    if dim <= 8 * budget:
        return "binary"
    raise ValueError(f"{dim}-d vectors do not fit {MAX_CODE_BYTES} bytes even as bits")


def encode(vecs: NDArray[Any], kind: str | None = None) -> list[bytes]:
    """Codes of the rows of ``vecs`` (unit vectors, as embedders return them)."""
    import numpy as np

    matrix = np.asarray(vecs, dtype=np.float32)
    if matrix.ndim != 2:
        raise ValueError(f"vectors must be a 2-d array, not shape {matrix.shape}")
    n, dim = matrix.shape
    chosen = kind or kind_for(dim)
    if chosen not in _KINDS:
        raise ValueError(f"unknown code kind {chosen!r}")
    if not np.isfinite(matrix).all():
        raise ValueError("vectors hold NaN or infinity")
    tag = _KINDS[chosen]
    # A zero vector (an empty text) gets the ZERO flag: it decodes to zeros and so never
    # ranks, where its sign bits alone would read as all -1.
    headers = [bytes([tag | ZERO]) if not row.any() else bytes([tag]) for row in matrix]
    if chosen == "binary":
        packed = np.packbits(matrix > 0, axis=1)
        return [h + row.tobytes() for h, row in zip(headers, packed, strict=True)]
    levels = 127 if chosen == "int8" else 7
    peak = np.abs(matrix).max(axis=1, keepdims=True)
    # Each row divided by its peak first (|x| / peak <= 1, so at most ``levels`` after the
    # product): ``levels / peak`` overflowed to infinity for a row of subnormal floats, whose
    # codes then came out of a cast of infinity and NaN (zeros here) and decoded to nothing.
    q = np.rint(matrix / np.where(peak > 0, peak, 1) * levels).astype(np.int8)
    if chosen == "int8":
        return [h + row.tobytes() for h, row in zip(headers, q, strict=True)]
    nibbles = (q.astype(np.int16) & 0x0F).astype(np.uint8)
    if dim % 2:
        nibbles = np.concatenate([nibbles, np.zeros((n, 1), dtype=np.uint8)], axis=1)
    packed = (nibbles[:, 0::2] | (nibbles[:, 1::2] << 4)).astype(np.uint8)
    return [h + row.tobytes() for h, row in zip(headers, packed, strict=True)]


def decode(codes: Sequence[bytes], dim: int) -> NDArray[np.float32]:
    """Unit float32 vectors (rows of zeros for zero codes) from codes of one kind and ``dim``."""
    import numpy as np

    out = _unscaled(codes, dim)
    norms = np.sqrt(np.einsum("ij,ij->i", out, out))[:, None]
    np.divide(out, norms, out=out, where=norms > 0)
    return out


def cosines(codes: Sequence[bytes], dim: int, query: NDArray[np.float32]) -> NDArray[np.float32]:
    """The cosine of each code's vector with the unit vector ``query`` (0 for a zero code):
    :func:`decode` then a product, without normalising the matrix first."""
    return _cosines(_unscaled(codes, dim), query)


def _cosines(vectors: NDArray[np.float32], query: NDArray[np.float32]) -> NDArray[np.float32]:
    import numpy as np

    scores: NDArray[np.float32] = np.einsum("ij,j->i", vectors, query)
    norms = np.sqrt(np.einsum("ij,ij->i", vectors, vectors))
    np.divide(scores, norms, out=scores, where=norms > 0)
    scores[norms == 0] = 0
    return scores


def code_size(first: int, dim: int) -> int:
    """Bytes of a code of ``dim`` dimensions whose header byte is ``first``."""
    kind = first & ~ZERO
    if kind not in (INT8, INT4, BINARY):
        raise ValueError("codes of mixed or unknown kinds")
    return 1 + {INT8: dim, INT4: (dim + 1) // 2, BINARY: (dim + 7) // 8}[kind]


def _unscaled(codes: Sequence[bytes], dim: int) -> NDArray[np.float32]:
    """The vectors of codes as stored (not unit length; zero codes as zeros)."""
    import numpy as np

    if not codes:
        return np.zeros((0, dim), dtype=np.float32)
    # Whole-array checks, no loop over the rows in Python: a query past IVF_FROM decodes
    # tens of thousands of codes, and a per-row loop cost more than the search.
    size = code_size(codes[0][0] if codes[0] else 0, dim)
    if set(map(len, codes)) != {size}:
        raise ValueError(f"a code is not {size} bytes long for {dim} dimensions")
    whole = np.frombuffer(b"".join(codes), dtype=np.uint8).reshape(len(codes), size)
    return _unscaled_matrix(whole, dim)


def _unscaled_matrix(whole: NDArray[np.uint8], dim: int) -> NDArray[np.float32]:
    """:func:`_unscaled` of codes given as the rows of a byte matrix (each row one code)."""
    import numpy as np

    n, size = whole.shape
    if n == 0:
        return np.zeros((0, dim), dtype=np.float32)
    heads = whole[:, 0]
    kind = int(heads[0]) & ~ZERO
    if code_size(kind, dim) != size or np.any((heads & ~np.uint8(ZERO)) != kind):
        raise ValueError("codes of mixed or unknown kinds")
    width = size - 1
    raw = whole[:, 1:]
    zero = (heads & ZERO) != 0
    if kind == INT8:
        converted: NDArray[np.float32] = raw.view(np.int8).astype(np.float32)  # one pass
        if zero.any():
            converted[zero] = 0
        return converted
    if kind == INT4:
        # Each nibble sign-extended by an arithmetic shift of the byte read as int8 (the high
        # one directly, the low one moved up first), written straight into its float column:
        # no int8 copy, no fix-up pass; 9x faster than masking and correcting the negatives.
        nibbles = np.empty((n, width, 2), dtype=np.float32)
        nibbles[:, :, 0] = (raw << 4).view(np.int8) >> 4
        nibbles[:, :, 1] = raw.view(np.int8) >> 4
        pairs: NDArray[np.float32] = nibbles.reshape(n, width * 2)
        out = pairs[:, :dim] if width * 2 != dim else pairs
    else:
        out = np.zeros((n, dim), dtype=np.float32)
        bits = np.unpackbits(raw, axis=1)[:, :dim]
        out[:] = bits.astype(np.float32) * 2 - 1
    if zero.any():
        out[zero] = 0
    return out


# -- rows ------------------------------------------------------------------------------------


def _key(blob: str) -> bytes | str:
    """A blob id as stored: its raw bytes when it is hex (git's ids: half the bytes), else
    the text itself. SQLite keeps BLOB and TEXT values apart, so the two never collide."""
    if blob and len(blob) % 2 == 0:
        try:
            return bytes.fromhex(blob)
        except ValueError:
            pass
    return blob


def _unkey(key: bytes | str) -> str:
    return key.hex() if isinstance(key, bytes) else str(key)


def _chunks(items: Sequence[Any]) -> Iterable[Sequence[Any]]:
    for start in range(0, len(items), _CHUNK):
        yield items[start : start + _CHUNK]


def _model_id(conn: sqlite3.Connection, model: str) -> int | None:
    row = conn.execute("SELECT id FROM vector_models WHERE model = ?", (model,)).fetchone()
    return int(row[0]) if row else None


def _bump(conn: sqlite3.Connection, model: str, dim: int | None) -> int:
    """Count a write against ``model`` (creating its row); returns its id."""
    conn.execute(
        "INSERT INTO vector_models (model, dim, gen) VALUES (?, ?, 1) "
        "ON CONFLICT(model) DO UPDATE SET gen = gen + 1, "
        "dim = CASE WHEN excluded.dim > 0 THEN excluded.dim ELSE dim END",
        (model, dim or 0),
    )
    found = _model_id(conn, model)
    assert found is not None
    return found


def _bump_all(conn: sqlite3.Connection) -> None:
    conn.execute("UPDATE vector_models SET gen = gen + 1")


def code_dim(code: bytes) -> int:
    """The dimension a code holds (int4 and binary codes round up to whole bytes)."""
    per_byte = {INT8: 1, INT4: 2, BINARY: 8}
    kind = code[0] & ~ZERO if code else 0
    if not 1 < len(code) <= MAX_CODE_BYTES or kind not in per_byte:
        raise ValueError(f"not a vector code ({len(code)} bytes)")
    return (len(code) - 1) * per_byte[kind]


def store_vectors(
    conn: sqlite3.Connection,
    model: str,
    items: Iterable[tuple[str, bytes]],
    *,
    dim: int | None = None,
    staged: bool = False,
) -> int:
    """Add the codes of blobs, each at the end of its list; returns how many were written.
    ``staged``: all in list 0, whatever the model's lists, for a caller that writes the
    records again with each vector in its list (:func:`sync`, embedding most of a model).

    A blob that already has a vector of ``model`` gets a second one, which search counts
    once (nothing finds a vector by its blob: sync only writes what catch-up marked
    pending, and a blob comes back only after it went). ``dim`` is the vectors' dimension;
    by default the code's own (an int4 code of odd or a binary code of a non-multiple-of-8
    dimension needs it given).
    """
    pairs = list({_key(blob): bytes(code) for blob, code in items}.items())
    if not pairs:
        return 0
    dims = {code_dim(code) for _, code in pairs}
    if len(dims) != 1:
        raise ValueError(f"codes of different lengths for one model {model!r}")
    model_id = _bump(conn, model, dim if dim is not None else dims.pop())
    lists = [0] * len(pairs) if staged else _assign(conn, model_id, [c for _, c in pairs])
    by_list: dict[int, list[tuple[bytes | str, bytes]]] = {}
    for pair, lst in zip(pairs, lists, strict=True):
        by_list.setdefault(lst, []).append(pair)
    capacity = record_capacity(conn, len(pairs[0][1]))
    for lst in sorted(by_list):
        if not _append(conn, model_id, lst, by_list[lst], capacity):
            # The list's record numbers ran out: number the model's records afresh, once.
            _rewrite(conn, model_id)
            if not _append(conn, model_id, lst, by_list[lst], capacity):
                raise ValueError(
                    f"a list of model {model!r} would hold over 2**{SEQ_BITS} records"
                )
    conn.execute(
        "UPDATE vector_models SET n = n + ?, live = live + ? WHERE id = ?",
        (len(pairs), len(pairs), model_id),
    )
    return len(pairs)


def _append(
    conn: sqlite3.Connection,
    model_id: int,
    lst: int,
    pairs: Sequence[tuple[bytes | str, bytes]],
    capacity: int,
) -> bool:
    """Put ``pairs`` at the end of list ``lst``: into its last record while it has room,
    then into new ones. False, having written nothing, when the list has no record
    numbers left."""
    low, high = _list_range(model_id, lst)
    last = conn.execute(
        f"SELECT {RECORD} FROM vectors WHERE id = (SELECT max(id) FROM vectors "
        "WHERE id BETWEEN ? AND ?)",
        (low, high),
    ).fetchone()
    size = len(pairs[0][1])
    todo = list(pairs)
    writes: list[tuple[int, list[bytes | str], list[bytes]]] = []
    following = low
    if last is not None:
        keys, joined = _checked(int(last[0]), last[1], last[2], (size, pairs[0][1][0] & ~ZERO))
        codes = [joined[i : i + size] for i in range(0, len(joined), size)]
        following = int(last[0]) + 1
        room = capacity - len(keys)
        if room > 0:
            head, todo = todo[:room], todo[room:]
            writes.append(
                (int(last[0]), [*keys, *(k for k, _ in head)],
                 [*codes, *(c for _, c in head)])
            )
    for start in range(0, len(todo), capacity):
        part = todo[start : start + capacity]
        writes.append((following, [k for k, _ in part], [c for _, c in part]))
        following += 1
    if following - 1 > high:
        return False
    conn.executemany(
        "INSERT OR REPLACE INTO vectors (id, keys, codes) VALUES (?, ?, ?)",
        ((rowid, _pack_keys(keys), b"".join(codes)) for rowid, keys, codes in writes),
    )
    return True


def record_capacity(conn: sqlite3.Connection | None, code_bytes: int) -> int:
    """Vectors in a full record of ``code_bytes``-byte codes: the count (32 to 64) whose
    record costs the fewest bytes a vector on the database's pages. Larger records save
    little more (277.5 bytes a vector at 123) and each write to a list rewrites its last.

    SQLite keeps a record's first part on a leaf of the table and the rest on overflow
    pages of ``page - 4`` bytes; how much stays on the leaf follows from the record's size
    (its file format: at least ``(page-12)*32/255-23`` bytes, the remainder of the overflow
    pages' when that fits, at most ``page-35``). The count chosen fills the overflow pages
    and wastes little of its leaf. 61 for 257-byte codes on 4 KiB pages: four full overflow
    pages and 537 bytes on a leaf (seven to a leaf), 278 bytes a vector."""
    page = 4096
    if conn is not None:
        page = int(conn.execute("PRAGMA page_size").fetchone()[0])
    usable = page - 8  # a leaf's own header
    most = page - 35
    least = (page - 12) * 32 // 255 - 23
    best, best_cost = 32, math.inf
    for n in range(32, 65):
        payload = 8 + n * (KEY_BYTES + code_bytes)  # record header and the keys' format byte
        if payload <= most:
            local, spilled = payload, 0
        else:
            local = least + (payload - least) % (page - 4)
            if local > most:
                local = least
            spilled = -(-(payload - local) // (page - 4))
        cell = local + 4 * (spilled > 0) + 11  # cell header, rowid, cell pointer
        cost = page / max(1, usable // cell) + spilled * page
        if cost / n < best_cost - 1e-9:
            best, best_cost = n, cost / n
    return best


def _pack_keys(keys: Sequence[bytes | str]) -> bytes:
    """A record's keys as one value: a byte ``w`` then the keys' raw bytes when every key is
    ``w`` raw bytes (git's ids); else a 0 and each key as its type (0 bytes, 1 text), its
    length in two bytes and itself."""
    widths = {len(k) if isinstance(k, bytes) else -1 for k in keys}
    if len(widths) == 1 and 0 < (width := widths.pop()) < 256:
        return bytes([width]) + b"".join(keys)  # type: ignore[arg-type]
    parts = [b"\x00"]
    for key in keys:
        raw = key if isinstance(key, bytes) else key.encode()
        if len(raw) > 0xFFFF:
            raise ValueError(f"a blob key of {len(raw)} bytes")
        parts.append(bytes([0 if isinstance(key, bytes) else 1]) + len(raw).to_bytes(2, "big"))
        parts.append(raw)
    return b"".join(parts)


def _damaged(rowid: int, what: str) -> IndexDamagedError:
    return IndexDamagedError(f"vector record {rowid} of the index is damaged: {what}")


def _unpack_keys(rowid: int, keys: bytes, count: int) -> list[bytes | str]:
    width = keys[0]
    if width:
        if len(keys) != 1 + count * width:
            raise _damaged(rowid, f"{len(keys) - 1} bytes of keys for {count} codes")
        return [keys[1 + i * width : 1 + (i + 1) * width] for i in range(count)]
    out: list[bytes | str] = []
    at = 1
    while at < len(keys):
        if at + 3 > len(keys):
            raise _damaged(rowid, "a key is cut short")
        kind, length = keys[at], int.from_bytes(keys[at + 1 : at + 3], "big")
        raw = keys[at + 3 : at + 3 + length]
        if kind not in (0, 1) or len(raw) != length:
            raise _damaged(rowid, "a key is cut short or of no known kind")
        try:
            out.append(raw if kind == 0 else raw.decode())
        except UnicodeDecodeError:
            raise _damaged(rowid, "a text key is not UTF-8") from None
        at += 3 + length
    if len(out) != count:
        raise _damaged(rowid, f"{len(out)} keys for {count} codes")
    return out


def _records(
    conn: sqlite3.Connection, low: int, high: int, form: tuple[int, int]
) -> Iterable[tuple[int, list[bytes | str], bytes]]:
    """(rowid, keys, codes joined) of the records with rowids in [low, high], in order,
    each checked: its codes of the model's size and kind (``form``, :func:`_format`), a key
    for each."""
    cursor = conn.execute(
        f"SELECT {RECORD} FROM vectors WHERE id BETWEEN ? AND ? ORDER BY id", (low, high)
    )
    for rowid, keys, codes in cursor:
        yield int(rowid), *_checked(int(rowid), keys, codes, form)


def _checked(
    rowid: int, keys: Any, codes: Any, form: tuple[int, int]
) -> tuple[list[bytes | str], bytes]:
    size, kind = form
    if not isinstance(keys, bytes) or not isinstance(codes, bytes) or not keys or not codes:
        raise _damaged(rowid, "a value is missing or not a blob")
    if len(codes) % size:
        raise _damaged(rowid, f"{len(codes)} bytes of codes are not a whole number of {size}")
    # Every code's first byte names its kind: one slice reads them all.
    if {head & ~ZERO for head in codes[::size]} != {kind}:
        raise _damaged(rowid, "a code of another kind")
    return _unpack_keys(rowid, keys, len(codes) // size), codes


def _format(conn: sqlite3.Connection, model_id: int) -> tuple[int, int] | None:
    """(code size, code kind) of the model's vectors, from its first record (None without
    records)."""
    low, high = _model_range(model_id)
    row = conn.execute(
        "SELECT m.dim, v.id, CASE WHEN typeof(v.codes) = 'blob' THEN v.codes END "
        "FROM vectors v, vector_models m WHERE m.id = ? "
        "AND v.id BETWEEN ? AND ? ORDER BY v.id LIMIT 1",
        (model_id, low, high),
    ).fetchone()
    if row is None:
        return None
    codes = row[2]
    if not isinstance(codes, bytes) or not codes:
        raise _damaged(int(row[1]), "a value is missing or not a blob")
    try:
        return code_size(codes[0], int(row[0])), codes[0] & ~ZERO
    except ValueError:
        raise _damaged(int(row[1]), "a code of no known kind") from None


def _model_records(
    conn: sqlite3.Connection, model_id: int
) -> Iterable[tuple[int, list[bytes | str], bytes]]:
    form = _format(conn, model_id)
    if form is None:
        return iter(())
    return _records(conn, *_model_range(model_id), form)


def _keys_of(conn: sqlite3.Connection, model_id: int) -> set[bytes | str]:
    """Every key the model's records hold (dead and repeated ones included)."""
    have: set[bytes | str] = set()
    for _, keys, _ in _model_records(conn, model_id):
        have.update(keys)
    return have


def missing(conn: sqlite3.Connection, model: str, blobs: Iterable[str]) -> set[str]:
    """The blobs among ``blobs`` that have no vector for ``model`` yet (reads the keys of
    every record of the model: sync asks only for a model that missed changes)."""
    wanted = list(dict.fromkeys(blobs))
    model_id = _model_id(conn, model)
    if model_id is None or not wanted:
        return set(wanted)
    have = _keys_of(conn, model_id)
    return {b for b in wanted if _key(b) not in have}


def remove(conn: sqlite3.Connection, blobs: Iterable[str], model: str | None = None) -> int:
    """Delete the vectors of ``blobs`` (of every model, or of one): the models' records
    are written again without them. Returns how many vectors went."""
    gone = {_key(b) for b in blobs}
    if model is not None:
        model_id = _model_id(conn, model)
        ids = [] if model_id is None else [model_id]
    else:
        ids = [int(r[0]) for r in conn.execute("SELECT id FROM vector_models ORDER BY id")]
    removed = sum(_rewrite(conn, m, keep=lambda key: key not in gone, live=True) for m in ids)
    if removed:
        _bump_all(conn)
    return removed


def prune(conn: sqlite3.Connection, keep: Iterable[str]) -> int:
    """Delete every vector whose blob is not in ``keep`` (the current memories' blobs)."""
    kept = {_key(b) for b in keep}
    ids = [int(r[0]) for r in conn.execute("SELECT id FROM vector_models ORDER BY id")]
    removed = sum(_rewrite(conn, m, keep=lambda key: key in kept, live=True) for m in ids)
    if removed:
        _bump_all(conn)
    return removed


def entries(
    conn: sqlite3.Connection, model: str | None = None
) -> list[tuple[str, int, str, bytes]]:
    """Every stored (model, list, blob, code), in the order of the records (tests, benches:
    a blob held twice appears twice)."""
    sql = "SELECT id, model FROM vector_models"
    params: tuple[Any, ...] = ()
    if model is not None:
        sql += " WHERE model = ?"
        params = (model,)
    out: list[tuple[str, int, str, bytes]] = []
    for model_id, name in conn.execute(sql + " ORDER BY id", params).fetchall():
        form = _format(conn, int(model_id))
        size = form[0] if form is not None else 0
        for rowid, keys, codes in _model_records(conn, int(model_id)):
            lst = (rowid >> SEQ_BITS) & ((1 << LIST_BITS) - 1)
            out.extend(
                (str(name), lst, _unkey(k), codes[i * size : (i + 1) * size])
                for i, k in enumerate(keys)
            )
    return out


def rows(conn: sqlite3.Connection, model: str | None = None) -> set[tuple[str, str, bytes]]:
    """Every stored (model, blob, code), for comparing an index with a rebuilt one (a blob
    held twice with one code counts once)."""
    return {(m, b, c) for m, _, b, c in entries(conn, model)}


# -- search ----------------------------------------------------------------------------------


@dataclass
class _Matrix:
    gen: int
    blobs: list[str]
    row_of: dict[str, int]
    vectors: NDArray[Any]


@dataclass(frozen=True)
class _ModelRow:
    id: int
    dim: int
    gen: int
    n: int
    """Vectors the model holds."""
    trained: int
    """Vectors it held when its lists were trained (0: no lists)."""
    lists_id: int
    live: int
    """Current blobs it counts (:data:`SCHEMA`): ``n`` less the vectors of gone blobs and
    the second vectors of blobs that came back, once sync has run."""


_matrices: dict[tuple[str, str], _Matrix] = {}
_probed: set[tuple[str, str]] = set()
"""(database, model) pairs this process has searched by their lists."""
_centroids: dict[tuple[str, int, int], NDArray[Any]] = {}
_matrices_lock = threading.Lock()


def _db_key(conn: sqlite3.Connection) -> str:
    row = conn.execute("PRAGMA database_list").fetchone()
    path = row[2] if row else ""
    return path or f"memory:{id(conn)}"


def matrix(conn: sqlite3.Connection, model: str) -> tuple[list[str], NDArray[np.float32]]:
    """Every stored vector of ``model`` decoded, with its blob ids (cached by generation)."""
    found = _load(conn, model)
    return found.blobs, found.vectors


CACHE_VECTORS = 100_000
"""Vectors of one model up to which :func:`top_k` decodes them all once and keeps the matrix
(for the next query of a long-lived process). Past it, an exact search reads them in chunks
of :data:`SCAN_CHUNK` and keeps only the best: decoded float32, a million 256-d vectors are
a gigabyte, over the 500 MB any command may use at 1M memories."""
SCAN_CHUNK = 16_384

IVF_FROM = 50_000
"""Vectors of one model from which search probes lists (an inverted file) instead of reading
every vector. Below it search is exact, as the recall quality benchmark measures it."""
LISTS_PER_ROOT = 2.0
"""A model's list count is this times the square root of its vector count (at least
:data:`MIN_LISTS`): 2,000 lists at a million."""
MIN_LISTS = 16
PROBE_ROWS = 24_576
"""About how many vectors a query reads: the lists of the nearest centroids, as many as
hold this many on average (at least :data:`MIN_PROBE`). A budget in rows keeps a query's
cost flat as the store grows; docs/recall.md has the recall@10 against exact search it
buys at 100k and 1M."""
MIN_PROBE = 8
SAMPLE_PER_LIST = 32
"""Vectors k-means trains on per list (a sample, at most :data:`MAX_SAMPLE`)."""
MAX_SAMPLE = 65_536
KMEANS_ROUNDS = 8
GROWTH = 2.0
"""Lists are trained again once the model holds this many times more (or fewer) vectors
than when they were trained: centroids of a small store fit a larger one badly."""
ASSIGN_CHUNK = 2048
"""Vectors given their nearest centroid at once (a chunk's scores against two thousand
centroids are 16 MB)."""


def _model(conn: sqlite3.Connection, model: str) -> _ModelRow | None:
    row = conn.execute(
        "SELECT id, dim, gen, n, trained, lists_id, live FROM vector_models WHERE model = ?",
        (model,),
    ).fetchone()
    return _ModelRow(*(int(x) for x in row)) if row is not None else None


def _cached(conn: sqlite3.Connection, model: str, gen: int) -> _Matrix | None:
    with _matrices_lock:
        cached = _matrices.get((_db_key(conn), model))
    return cached if cached is not None and cached.gen == gen else None


def _load(conn: sqlite3.Connection, model: str) -> _Matrix:
    import numpy as np

    found_model = _model(conn, model)
    if found_model is None:
        return _Matrix(0, [], {}, np.zeros((0, 0), dtype=np.float32))
    cached = _cached(conn, model, found_model.gen)
    if cached is not None:
        return cached
    keys: list[bytes | str] = []
    parts: list[bytes] = []
    size = 0
    form = _format(conn, found_model.id)
    if form is not None:
        size = form[0]
        for _, record_keys, codes in _records(conn, *_model_range(found_model.id), form):
            keys.extend(record_keys)
            parts.append(codes)
    # A blob held twice (it came back while its old vector was still there) is counted
    # once: its first vector in rowid order, as one row would have been.
    row_of: dict[str, int] = {}
    firsts: list[int] = []
    for i, key in enumerate(keys):
        blob = _unkey(key)
        if blob not in row_of:
            row_of[blob] = len(firsts)
            firsts.append(i)
    if size:
        whole = np.frombuffer(b"".join(parts), dtype=np.uint8).reshape(len(keys), size)
        if len(firsts) < len(keys):
            whole = whole[np.asarray(firsts, dtype=np.int64)]
        vectors = _decoded(whole, found_model.dim)
    else:
        vectors = np.zeros((0, found_model.dim), dtype=np.float32)
    loaded = _Matrix(found_model.gen, list(row_of), row_of, vectors)
    with _matrices_lock:
        _matrices[(_db_key(conn), model)] = loaded
    return loaded


def _decoded(whole: NDArray[np.uint8], dim: int) -> NDArray[np.float32]:
    """:func:`decode` of codes given as the rows of a byte matrix."""
    import numpy as np

    out = _unscaled_matrix(whole, dim)
    norms = np.sqrt(np.einsum("ij,ij->i", out, out))[:, None]
    np.divide(out, norms, out=out, where=norms > 0)
    return out


def top_k(
    conn: sqlite3.Connection,
    model: str,
    query_vec: NDArray[Any],
    k: int,
    allowed_blobs: Iterable[str] | None = None,
    *,
    exact: bool = False,
) -> list[tuple[str, float]]:
    """The ``k`` stored blobs nearest ``query_vec`` by cosine, best first, as (blob, cosine).

    ``allowed_blobs`` limits the candidates (the current memories that pass recall's
    filters); vectors of other blobs are never returned. Up to :data:`CACHE_VECTORS` the
    decoded matrix is kept for the next query; past it the vectors are read a chunk at a
    time (the same answer, in memory bounded by a chunk). From :data:`IVF_FROM` vectors of
    a model with trained lists only the probed lists are read (:func:`_top_k_ivf`), unless
    ``exact`` or, up to :data:`CACHE_VECTORS`, from a process's second query on.
    """
    import numpy as np

    if k <= 0:
        return []
    found_model = _model(conn, model)
    if found_model is None:
        return []
    model_id, dim, gen = found_model.id, found_model.dim, found_model.gen
    query = np.asarray(query_vec, dtype=np.float32).reshape(-1)
    if query.shape[0] != dim:
        raise ValueError(f"a {query.shape[0]}-d query for {dim}-d vectors of {model!r}")
    norm = float(np.linalg.norm(query))
    if norm == 0 or not np.isfinite(norm):
        return []
    query = query / norm
    allowed = None
    if allowed_blobs is not None:
        allowed = (
            allowed_blobs if isinstance(allowed_blobs, set | frozenset) else set(allowed_blobs)
        )
    cached = _cached(conn, model, gen)
    if not exact and found_model.lists_id and found_model.n >= IVF_FROM:
        # Up to CACHE_VECTORS a process's second query loads the whole matrix and is exact
        # from then on (5-8 ms at 100k, where probing lists took 50); the first, which may be
        # a one-shot command's only one, probes lists rather than read every code.
        key = (_db_key(conn), model)
        if cached is None and (found_model.n > CACHE_VECTORS or key not in _probed):
            _probed.add(key)
            return _top_k_ivf(conn, found_model, query, k, allowed)
    if cached is None and found_model.n > CACHE_VECTORS:
        return _top_k_scan(conn, model_id, dim, query, k, allowed)
    found = cached if cached is not None else _load(conn, model)
    if not found.blobs:
        return []
    # einsum, not ``@``: a matrix-vector product through a multi-threaded BLAS took 36 ms
    # instead of 1.4 ms at 10k on a busy 2-core machine (its threads wait for each other).
    scores = np.einsum("ij,j->i", found.vectors, query)
    total = scores.shape[0]
    # Best first, ties by row (the blob order of the table): partial sorts of a growing
    # head, so a filter that lets most blobs through costs no more than none.
    want = max(4 * k, 64)
    while True:
        head = min(want, total)
        top = np.argpartition(-scores, head - 1)[:head] if head < total else np.arange(total)
        ordered = top[np.lexsort((top, -scores[top]))]
        picked = [
            (found.blobs[int(r)], float(scores[r]))
            for r in ordered
            if allowed is None or found.blobs[int(r)] in allowed
        ]
        if len(picked) >= k or head >= total:
            return picked[:k]
        want *= 4


class _Best:
    """The best ``k`` (score, row, key) seen so far, ties by row; rows are numbered in the
    order they were read. A batch's keys are made only for the rows it keeps (a query past
    IVF_FROM scores tens of thousands of rows to keep ten)."""

    def __init__(self, k: int) -> None:
        import numpy as np

        self.k = k
        self.scores = np.zeros(0, dtype=np.float32)
        self.rows = np.zeros(0, dtype=np.int64)
        self.keys: list[Any] = []
        self.seen = 0

    def add(self, key_of: Callable[[int], Any], scores: NDArray[Any], allowed: Any) -> None:
        """Score a batch: ``key_of(i)`` is the stored key of its row ``i``."""
        import numpy as np

        k = self.k
        picked = np.arange(len(scores), dtype=np.int64)
        if allowed is not None:
            keep = np.fromiter(
                (_unkey(key_of(int(i))) in allowed for i in picked), dtype=bool, count=len(picked)
            )
            picked = picked[keep]
        if len(picked) > k:
            # The rows that score at least the m-th best of the batch, m from k up until
            # they hold k blobs (a blob held twice takes two rows): every row of the best k
            # blobs is among them.
            m = k
            while m < len(picked):
                kth = np.partition(-scores[picked], m - 1)[m - 1]
                top = picked[-scores[picked] <= kth]
                if len({key_of(int(i)) for i in top}) >= k:
                    picked = top
                    break
                m *= 4
        self.scores = np.concatenate([self.scores, scores[picked]])
        self.rows = np.concatenate([self.rows, picked + self.seen])
        self.keys.extend(key_of(int(i)) for i in picked)
        self.seen += len(scores)
        if len(self.keys) > 4 * k:
            self._cut()

    def _cut(self) -> None:
        """Keep the best ``k`` blobs, each by its best row (ties by row)."""
        import numpy as np

        order = np.lexsort((self.rows, -self.scores))
        kept: list[int] = []
        seen: set[Any] = set()
        for i in order:
            key = self.keys[int(i)]
            if key not in seen:
                seen.add(key)
                kept.append(int(i))
                if len(kept) == self.k:
                    break
        chosen = np.asarray(kept, dtype=np.int64)
        self.scores, self.rows = self.scores[chosen], self.rows[chosen]
        self.keys = [self.keys[i] for i in kept]

    def result(self) -> list[tuple[str, float]]:
        self._cut()
        return [(_unkey(b), float(s)) for b, s in zip(self.keys, self.scores, strict=True)]


def _top_k_scan(
    conn: sqlite3.Connection,
    model_id: int,
    dim: int,
    query: NDArray[np.float32],
    k: int,
    allowed: set[str] | frozenset[str] | None,
) -> list[tuple[str, float]]:
    """:func:`top_k` reading the records of about :data:`SCAN_CHUNK` vectors at a time: each
    chunk's best ``k`` blobs (with every row tied with its k-th) join the candidates, which
    are cut back to the best ``k`` as they go. Ties by row, as the whole-matrix search
    orders them."""
    import numpy as np

    best = _Best(k)
    form = _format(conn, model_id)
    if form is None:
        return []
    size = form[0]
    keys: list[bytes | str] = []
    parts: list[bytes] = []

    def score() -> None:
        whole = np.frombuffer(b"".join(parts), dtype=np.uint8).reshape(len(keys), size)
        # decode then a product, as the whole-matrix search: the same floats to the bit.
        scores = np.einsum("ij,j->i", _decoded(whole, dim), query)
        batch = list(keys)
        best.add(batch.__getitem__, scores, allowed)
        keys.clear()
        parts.clear()

    for _, record_keys, codes in _records(conn, *_model_range(model_id), form):
        keys.extend(record_keys)
        parts.append(codes)
        if len(keys) >= SCAN_CHUNK:
            score()
    if keys:
        score()
    return best.result()


def list_count(n: int) -> int:
    """How many lists a model of ``n`` vectors is trained with."""
    return min(1 << LIST_BITS, max(MIN_LISTS, round(LISTS_PER_ROOT * math.sqrt(n))))


def sample_size(n: int) -> int:
    """How many of ``n`` vectors k-means trains on."""
    return max(list_count(n), min(MAX_SAMPLE, SAMPLE_PER_LIST * list_count(n)))


def probes(lists: int, n: int) -> int:
    """How many of ``lists`` lists over ``n`` vectors a query reads."""
    return min(lists, max(MIN_PROBE, -(-PROBE_ROWS * lists // max(n, 1))))


def _top_k_ivf(
    conn: sqlite3.Connection,
    model: _ModelRow,
    query: NDArray[np.float32],
    k: int,
    allowed: set[str] | frozenset[str] | None,
) -> list[tuple[str, float]]:
    """:func:`top_k` over the lists whose centroids are nearest ``query`` (:func:`probes`
    of them); with a filter that leaves fewer than ``k``, the next nearest lists too, up
    to all of them. Approximate: a vector nearer the query than the ``k``-th found may sit
    in a list not read (docs/recall.md has how often). Ties by row in rowid order."""
    import numpy as np

    centroids = _load_centroids(conn, model)
    if centroids.shape[0] == 0:
        return _top_k_scan(conn, model.id, model.dim, query, k, allowed)
    order = np.argsort(-np.einsum("ij,j->i", centroids, query), kind="stable")
    best = _Best(k)
    start, width = 0, probes(len(order), model.n)
    while start < len(order):
        chosen = sorted(int(x) for x in order[start : start + width])
        _probe(conn, model, chosen, query, best, allowed)
        start += width
        if allowed is None or len(best.keys) >= k:
            break
        width *= 2
    return best.result()


def _probe(
    conn: sqlite3.Connection,
    model: _ModelRow,
    lists: Sequence[int],
    query: NDArray[np.float32],
    best: _Best,
    allowed: set[str] | frozenset[str] | None,
) -> None:
    """Score every vector of ``lists`` into ``best``: each list is one range scan of its
    records, a few dozen vectors each (version 6 read a row a vector, and fetching them
    was most of a query's time)."""
    import numpy as np

    form = _format(conn, model.id)
    if form is None:
        return
    size = form[0]
    keys: list[bytes | str] = []
    parts: list[bytes] = []
    for lst in lists:
        for _, record_keys, codes in _records(conn, *_list_range(model.id, lst), form):
            keys.extend(record_keys)
            parts.append(codes)
    if keys:
        whole = np.frombuffer(b"".join(parts), dtype=np.uint8).reshape(len(keys), size)
        best.add(keys.__getitem__, _cosines(_unscaled_matrix(whole, model.dim), query), allowed)


def _load_centroids(conn: sqlite3.Connection, model: _ModelRow) -> NDArray[np.float32]:
    """The model's centroids as rows of a float32 matrix (kept per training: a query reads
    them once)."""
    import numpy as np

    key = (_db_key(conn), model.id, model.lists_id)
    with _matrices_lock:
        cached = _centroids.get(key)
    if cached is not None:
        return cached
    found = conn.execute(
        "SELECT centroid FROM vector_lists WHERE model = ? ORDER BY list", (model.id,)
    ).fetchall()
    raw = b"".join(bytes(r[0]) for r in found)
    if len(raw) != len(found) * model.dim * 4:
        raise ValueError(f"centroids of model {model.id} are not {model.dim}-d float32")
    loaded = np.frombuffer(raw, dtype="<f4").reshape(len(found), model.dim).copy()
    with _matrices_lock:
        if len(_centroids) > 16:
            _centroids.clear()
        _centroids[key] = loaded
    return loaded


def _assign(conn: sqlite3.Connection, model_id: int, codes: Sequence[bytes]) -> list[int]:
    """The list of each code: its nearest centroid's, or 0 while the model has no lists."""
    import numpy as np

    row = conn.execute(
        "SELECT id, dim, gen, n, trained, lists_id, live FROM vector_models WHERE id = ?",
        (model_id,),
    ).fetchone()
    model = _ModelRow(*(int(x) for x in row))
    if not model.lists_id or not codes:
        return [0] * len(codes)
    centroids = _load_centroids(conn, model)
    if centroids.shape[0] == 0:
        return [0] * len(codes)  # lists named but gone: search scans, as without lists
    out: list[int] = []
    for start in range(0, len(codes), ASSIGN_CHUNK):
        decoded = decode(codes[start : start + ASSIGN_CHUNK], model.dim)
        out.extend(int(x) for x in np.argmax(decoded @ centroids.T, axis=1))
    return out


def train_due(conn: sqlite3.Connection, model: str, *, expect: int | None = None) -> bool:
    """Whether ``model``'s lists should be trained (again) now: it counts (or is about to,
    ``expect``) :data:`IVF_FROM` live vectors or more and has no lists, or :data:`GROWTH` times
    more or fewer than when they were trained."""
    found = _model(conn, model)
    if found is None:
        return False
    size = max(found.live, expect or 0)
    if size < IVF_FROM:
        return False
    if not found.lists_id or not found.trained:
        return True
    return size > found.trained * GROWTH or size * GROWTH < found.trained


def train(conn: sqlite3.Connection, model: str, *, expect: int | None = None) -> int:
    """Train ``model``'s lists by k-means on a sample of its vectors and move every vector
    to its nearest list; returns the number of lists (0 for a model with no vectors).

    The vectors of blobs no memory holds any more go first, and a blob held twice keeps
    one (:func:`_export`): the lists are trained on, and hold, the live vectors only.
    Deterministic for given vectors (a fixed seed). Copies the model's vectors to a scratch
    table in SQLite's temporary file, reads them twice, a chunk at a time (the sample, then
    the assignment), and holds the sample: :data:`MAX_SAMPLE` 256-d vectors are 64 MB. Runs
    inside the caller's write transaction. ``expect`` is the count the model is about to
    reach (a first embedding trains on the sample it stored first, sized for the whole,
    rather than moving every vector once it is done).
    """
    import secrets

    import numpy as np

    found = _model(conn, model)
    if found is None or found.n == 0:
        return 0
    count = _export(conn, found.id, purge=True)
    if count == 0:
        _import(conn, found.id)
        return 0
    size = max(count, expect or 0)
    lists = list_count(size)
    want = min(count, sample_size(size))
    rng = np.random.default_rng(count)
    picks = np.sort(rng.choice(count, size=want, replace=False))
    # Filled in place: a list of parts joined at the end would hold the sample twice.
    sample = np.zeros((want, found.dim), dtype=np.float32)
    taken = seen = 0
    cursor = conn.execute("SELECT code FROM temp.vector_copy ORDER BY ord")
    while True:
        chunk = cursor.fetchmany(SCAN_CHUNK)
        if not chunk:
            break
        lo, hi = np.searchsorted(picks, [seen, seen + len(chunk)])
        if hi > lo:
            sample[taken : taken + hi - lo] = decode(
                [chunk[int(i) - seen][0] for i in picks[lo:hi]], found.dim
            )
            taken += int(hi - lo)
        seen += len(chunk)
    sample = sample[:taken]
    lists = min(lists, len(sample))
    centroids = _kmeans(sample.astype(np.float32), lists, rng)
    lists_id = secrets.randbits(62) or 1
    conn.execute("DELETE FROM vector_lists WHERE model = ?", (found.id,))
    conn.executemany(
        "INSERT INTO vector_lists (model, list, centroid) VALUES (?, ?, ?)",
        ((found.id, i, c.astype("<f4").tobytes()) for i, c in enumerate(centroids)),
    )
    conn.execute(
        "UPDATE vector_models SET trained = ?, lists_id = ?, gen = gen + 1 WHERE id = ?",
        (size, lists_id, found.id),
    )

    # Every vector to its nearest list, and the model's records written again in key order.
    def nearest_lists(codes: list[bytes]) -> Iterable[int]:
        near = np.argmax(decode(codes, found.dim) @ centroids.T, axis=1)
        return (int(x) for x in near)

    _import(conn, found.id, nearest_lists)
    log.info("vectors: %d lists trained for %s over %d vectors", lists, model, count)
    return lists


COPY_DDL = (
    "CREATE TEMP TABLE IF NOT EXISTS vector_copy (blob NOT NULL PRIMARY KEY, "
    "list INTEGER NOT NULL, code BLOB NOT NULL, ord INTEGER NOT NULL) WITHOUT ROWID"
)
"""The scratch copy of a model's vectors that :func:`_rewrite` and :func:`train` work on,
one row a blob (no type affinity on ``blob``: a raw id stays a blob, a text key text)."""


def _rewrite(
    conn: sqlite3.Connection,
    model_id: int,
    lists_of: Callable[[list[bytes]], Iterable[int]] | None = None,
    *,
    keep: Callable[[bytes | str], bool] | None = None,
    purge: bool = False,
    live: bool = False,
) -> int:
    """Write a model's records again (:func:`_export` then :func:`_import`): each vector in
    the list ``lists_of`` gives it (default: the one it is in), the vectors ``keep``
    refuses, or with ``purge`` those of blobs no memory holds, left out, a blob held twice
    kept once. Returns how many vectors went; with ``live`` they were live (an explicit
    :func:`remove`), else they were of gone or repeated blobs, which ``live`` never
    counted."""
    before = _stored(conn, model_id)
    count = _export(conn, model_id, keep=keep, purge=purge)
    _import(conn, model_id, lists_of)
    if live:
        conn.execute(
            "UPDATE vector_models SET live = max(live - ?, 0) WHERE id = ?",
            (before - count, model_id),
        )
    return before - count


def _export(
    conn: sqlite3.Connection,
    model_id: int,
    *,
    keep: Callable[[bytes | str], bool] | None = None,
    purge: bool = False,
) -> int:
    """Copy a model's vectors to ``temp.vector_copy``: each blob once (its first vector in
    rowid order, which ``ord`` keeps), none that ``keep`` refuses, and with ``purge`` none
    of a blob no memory holds (when the index has its core tables: a bare vector database
    has none). Returns how many were copied. Holds none of them: the copy is SQLite's
    temporary file."""
    conn.execute(COPY_DDL)
    conn.execute("DELETE FROM temp.vector_copy")
    form = _format(conn, model_id)
    order = 0
    if form is not None:
        size = form[0]
        for rowid, keys, codes in _records(conn, *_model_range(model_id), form):
            lst = (rowid >> SEQ_BITS) & ((1 << LIST_BITS) - 1)
            rows = []
            for i, key in enumerate(keys):
                if keep is None or keep(key):
                    rows.append((key, lst, codes[i * size : (i + 1) * size], order))
                    order += 1
            conn.executemany(
                "INSERT OR IGNORE INTO temp.vector_copy (blob, list, code, ord) "
                "VALUES (?, ?, ?, ?)",
                rows,
            )
    if purge and _has_memories(conn):
        # A raw key is a hex blob id (memories.blob), a text key the id itself.
        conn.execute(
            "DELETE FROM temp.vector_copy WHERE NOT EXISTS (SELECT 1 FROM main.memories m "
            "WHERE m.blob = CASE WHEN typeof(vector_copy.blob) = 'blob' "
            "THEN lower(hex(vector_copy.blob)) ELSE vector_copy.blob END)"
        )
    return int(conn.execute("SELECT count(*) FROM temp.vector_copy").fetchone()[0])


def _has_memories(conn: sqlite3.Connection) -> bool:
    return (
        conn.execute(
            "SELECT 1 FROM main.sqlite_master WHERE type = 'table' AND name = 'memories'"
        ).fetchone()
        is not None
    )


def _import(
    conn: sqlite3.Connection,
    model_id: int,
    lists_of: Callable[[list[bytes]], Iterable[int]] | None = None,
) -> None:
    """Replace a model's records by ``temp.vector_copy``, each vector in the list
    ``lists_of`` gives it (its old one by default), each list numbered from record 0 in
    blob order and its records full but the last (:func:`record_capacity`). Raises
    ValueError, before changing anything, when a list would need more than 2**SEQ_BITS
    records."""
    if lists_of is not None:
        cursor = conn.execute("SELECT blob, code FROM temp.vector_copy ORDER BY ord")
        while True:
            chunk = cursor.fetchmany(ASSIGN_CHUNK)
            if not chunk:
                break
            lists = list(lists_of([r[1] for r in chunk]))
            conn.executemany(
                "UPDATE temp.vector_copy SET list = ? WHERE blob = ?",
                ((lst, r[0]) for r, lst in zip(chunk, lists, strict=True)),
            )
    count = int(conn.execute("SELECT count(*) FROM temp.vector_copy").fetchone()[0])
    first = conn.execute("SELECT code FROM temp.vector_copy LIMIT 1").fetchone()
    capacity = record_capacity(conn, len(first[0])) if first is not None else 1
    longest = conn.execute(
        "SELECT max(n) FROM (SELECT count(*) AS n FROM temp.vector_copy GROUP BY list)"
    ).fetchone()[0]
    if longest is not None and -(-longest // capacity) > 1 << SEQ_BITS:
        conn.execute("DELETE FROM temp.vector_copy")
        raise ValueError(
            f"a list of model {model_id} holds {longest} vectors, over 2**{SEQ_BITS} records"
        )
    conn.execute("DELETE FROM vectors WHERE id BETWEEN ? AND ?", _model_range(model_id))
    cursor = conn.execute("SELECT list, blob, code FROM temp.vector_copy ORDER BY list, blob")
    current, seq = -1, 0
    keys: list[bytes | str] = []
    codes: list[bytes] = []

    def flush() -> None:
        nonlocal seq
        if keys:
            conn.execute(
                "INSERT INTO vectors (id, keys, codes) VALUES (?, ?, ?)",
                (row_id(model_id, current, seq), _pack_keys(keys), b"".join(codes)),
            )
            seq += 1
            keys.clear()
            codes.clear()

    for lst, key, code in _iterate(cursor):
        if lst != current:
            flush()
            current, seq = int(lst), 0
        keys.append(key)
        codes.append(code)
        if len(keys) == capacity:
            flush()
    flush()
    conn.execute("UPDATE vector_models SET n = ? WHERE id = ?", (count, model_id))
    conn.execute("DELETE FROM temp.vector_copy")


def _iterate(cursor: sqlite3.Cursor) -> Iterable[Any]:
    """A cursor's rows, fetched a chunk at a time (a whole model is not held)."""
    while True:
        chunk = cursor.fetchmany(ASSIGN_CHUNK)
        if not chunk:
            return
        yield from chunk


def _kmeans(sample: NDArray[np.float32], lists: int, rng: Any) -> NDArray[np.float32]:
    """Spherical k-means (unit centroids, cosine): :data:`KMEANS_ROUNDS` rounds from
    ``lists`` distinct sample rows. A list left empty keeps its centroid."""
    import numpy as np

    start = rng.choice(len(sample), size=lists, replace=False)
    centroids: NDArray[np.float32] = sample[np.sort(start)].astype(np.float32)
    for _ in range(KMEANS_ROUNDS):
        sums = np.zeros_like(centroids)
        for i in range(0, len(sample), ASSIGN_CHUNK):
            # A chunk at a time, sums by sorted runs: no copy of the whole sample.
            part = sample[i : i + ASSIGN_CHUNK]
            near = np.argmax(part @ centroids.T, axis=1)
            order = np.argsort(near, kind="stable")
            ranked = near[order]
            starts = np.flatnonzero(np.r_[True, ranked[1:] != ranked[:-1]])
            sums[ranked[starts]] += np.add.reduceat(part[order], starts, axis=0)
        norms = np.linalg.norm(sums, axis=1, keepdims=True)
        moved = norms[:, 0] > 0
        centroids[moved] = sums[moved] / norms[moved]
    return centroids


def clear_cache() -> None:
    """Forget decoded matrices and centroids (tests; memory)."""
    with _matrices_lock:
        _matrices.clear()
        _centroids.clear()
        _probed.clear()


# -- the index's row provider: which blobs need a vector -------------------------------------

PENDING_DDL = "CREATE TABLE vector_pending (blob BLOB PRIMARY KEY) WITHOUT ROWID"
OLD_TABLES = ("vector_rows",)
"""Tables of older versions that a refill drops and this one does not create. Up to version
5 ``vector_rows`` mapped each memory to its blob (32 bytes a memory at 100k, 104 in version
4); since 6 sync and nearest look memories up by blob in the core table, through its index
``memories_blob`` (catch-up has written the core rows before it hands changes over)."""
DF_DDL = (
    "CREATE TABLE vector_df (model INTEGER NOT NULL, token INTEGER NOT NULL, "
    "df INTEGER NOT NULL, PRIMARY KEY (model, token)) WITHOUT ROWID",
    "CREATE TABLE vector_gone (model INTEGER NOT NULL, blob TEXT NOT NULL, text TEXT NOT NULL, "
    "PRIMARY KEY (model, blob)) WITHOUT ROWID",
)
"""For an embedder that exposes its tokens (the static default): in how many of the current
blobs that have its vectors each token occurs. A query's tokens are weighted by their
inverse document frequency (:func:`nearest`). ``vector_gone`` holds the text of a counted
blob that stopped being current (:func:`_apply`), until sync takes its tokens off."""
VECTORS_VERSION = 7
"""4: lists (an inverted file) over the vectors past :data:`IVF_FROM`, and each model's count.
5: ``vector_rows`` keyed by (raw blob, memory), ``vector_lists`` a rowid table.
6: ``vectors`` a rowid table whose rowids follow (model, list), its blob index on 8-byte
prefixes; no ``vector_rows`` (:data:`OLD_TABLES`).
7: ``vectors`` holds records of many vectors, no blob index; catch-up no longer deletes a
vector (:data:`SCHEMA`), and each model counts its ``live`` blobs.
An older index drops its vector tables on the next catch-up and the next recall embeds
again."""


def _apply(conn: sqlite3.Connection, _repo: pygit2.Repository, changes: RowChanges) -> None:
    """Catch-up's part: mark pending the blobs that became current (no memory held them
    before this change), and note the blobs that stopped being current. The embedding
    itself waits for the first semantic query (:func:`sync`): commands that never recall (a
    hook, ``gitmem list``) must not load an embedder.

    No vector is deleted (nothing finds one by its blob): a gone blob's vector stays until
    the next :func:`train` or compaction, and search skips it. What must be exact is the
    document frequencies, which count each current blob once. For a model that is
    complete, every current blob not pending is counted, so a blob that stops being
    current is: unless it is pending (then it was never counted, or a ``vector_gone`` row
    already takes it off), its text goes to ``vector_gone`` for the next sync to take its
    tokens off. A model that is not complete has its counts made again by its next sync."""
    if changes.full:
        # A refill: the tables were just made, nothing is counted, every blob is new.
        conn.executemany(
            "INSERT OR IGNORE INTO vector_pending (blob) VALUES (?)",
            ((_key(a.blob),) for a in changes.added),
        )
        return
    delta: dict[str, int] = {}
    for a in changes.added:
        delta[a.blob] = delta.get(a.blob, 0) + 1
    for r in changes.removed:
        delta[r.blob] = delta.get(r.blob, 0) - 1
    changed = {b for b, d in delta.items() if d}
    if not changed:
        return
    # The core rows are current: a blob's memories now, and before this change.
    now = _held(conn, changed)
    came = sorted(b for b in changed if now.get(b, 0) > 0 and now.get(b, 0) - delta[b] <= 0)
    went = sorted(b for b in changed if now.get(b, 0) <= 0 and -delta[b] > 0)
    if went:
        keys = [_key(b) for b in went]
        pending: set[bytes | str] = set()
        for chunk in _chunks(keys):
            marks = ",".join("?" * len(chunk))
            pending.update(
                r[0]
                for r in conn.execute(
                    f"SELECT blob FROM vector_pending WHERE blob IN ({marks})", tuple(chunk)
                )
            )
            conn.execute(f"DELETE FROM vector_pending WHERE blob IN ({marks})", tuple(chunk))
        counted = [b for b in went if _key(b) not in pending]
        if counted:
            texts = {
                r.blob: embed_text(r.memory.title, r.memory.body)
                for r in changes.removed
                if r.blob in counted
            }
            models = [r[0] for r in conn.execute("SELECT id FROM vector_models WHERE complete")]
            conn.executemany(
                "INSERT OR REPLACE INTO vector_gone (model, blob, text) VALUES (?, ?, ?)",
                ((m, b, texts.get(b, "")) for m in models for b in counted),
            )
    if came:
        conn.executemany(
            "INSERT OR IGNORE INTO vector_pending (blob) VALUES (?)",
            ((_key(b),) for b in came),
        )


def _held(conn: sqlite3.Connection, blobs: set[str]) -> dict[str, int]:
    """How many current memories hold each of ``blobs`` (the core rows are current)."""
    held: dict[str, int] = {}
    for chunk in _chunks(sorted(blobs)):
        marks = ",".join("?" * len(chunk))
        held.update(
            (str(r[0]), int(r[1]))
            for r in conn.execute(
                f"SELECT blob, count(*) FROM memories WHERE blob IN ({marks}) GROUP BY blob",
                tuple(chunk),
            )
        )
    return held


VECTORS = RowProvider(
    name="vectors",
    version=VECTORS_VERSION,
    tables=("vector_gone", "vector_df", "vector_pending", "vector_lists", "vectors",
            "vector_models", *OLD_TABLES),
    ddl=(
        *(statement.replace("IF NOT EXISTS ", "") for statement in SCHEMA.split(";")
          if statement.strip()),
        PENDING_DDL,
        *DF_DDL,
    ),
    apply=_apply,
)
register(VECTORS)


# -- embedding what is pending, and semantic queries -------------------------------------------

COMPACT_SHARE = 0.5
COMPACT_FROM = 10_000
"""A sync that wrote :data:`COMPACT_SHARE` of a model's vectors or more, and at least this
many, writes them again in key order (:func:`_rewrite`)."""
DEAD_SHARE = 0.25
DEAD_FROM = 1000
"""A sync after which a model's records hold more than :data:`DEAD_SHARE` of its live count
in vectors of gone (or repeated) blobs, and at least this many, writes the records again
without them, as :func:`train` does: below :data:`IVF_FROM` there is no training to."""
SYNC_BATCH = 1000
"""Memories embedded and written per step of :func:`sync`."""
MAX_TEXT = 8000
"""Characters of a memory handed to the embedder (its title and the start of its body)."""


def embed_text(title: str | None, body: str) -> str:
    """The text of a memory that is embedded: its title, then its body, bounded."""
    text = f"{title}\n{body}" if title else body
    return text[:MAX_TEXT]


def _complete(conn: sqlite3.Connection, model: str) -> bool:
    """Whether every current memory has a vector of ``model`` (nothing pending)."""
    row = conn.execute(
        "SELECT complete, id FROM vector_models WHERE model = ?", (model,)
    ).fetchone()
    if row is None or not row[0]:
        return False
    if conn.execute("SELECT 1 FROM vector_pending LIMIT 1").fetchone() is not None:
        return False
    gone = conn.execute("SELECT 1 FROM vector_gone WHERE model = ? LIMIT 1", (row[1],))
    return gone.fetchone() is None


def sync(index: Index, embedder: Embedder, progress: Any = None) -> int:
    """Embed the current memories that have no vector for ``embedder`` yet; returns how many.

    Cheap when nothing is pending (two indexed lookups). After a catch-up it embeds the
    blobs catch-up marked pending; for a model the index has not seen (the user changed
    embedders, or the index was rebuilt) it embeds every current memory, at the default
    embedder's ten thousand or more short memories a second, and for a model that missed
    changes (another model's sync took the pending list) the current memories its records
    do not hold, its counts made again.
    """
    conn = index.connect()
    index.catch_up()
    model = embedder.name
    if _complete(conn, model):
        return 0
    written = 0
    with index.writing(conn):
        row = conn.execute(
            "SELECT complete, id, n FROM vector_models WHERE model = ?", (model,)
        ).fetchone()
        tokens = getattr(embedder, "token_ids", None)
        if row is not None and row[0]:
            # Catch-up kept the pending list and the gone texts for this model: embed the
            # one, take the other's tokens off, and nothing else changes.
            need = sorted(_unkey(r[0]) for r in conn.execute("SELECT blob FROM vector_pending"))
            model_id = _bump(conn, model, embedder.dim)
            gone = conn.execute(
                "SELECT text FROM vector_gone WHERE model = ?", (model_id,)
            ).fetchall()
            if tokens is not None and gone:
                _count(conn, model_id, (tokens(t) for (t,) in gone), -1)
            conn.execute(
                "UPDATE vector_models SET live = max(live - ?, 0) WHERE id = ?",
                (len(gone), model_id),
            )
        else:
            wanted = [r[0] for r in conn.execute("SELECT DISTINCT blob FROM memories")]
            need = sorted(missing(conn, model, wanted))
            model_id = _bump(conn, model, embedder.dim)
            conn.execute("DELETE FROM vector_df WHERE model = ?", (model_id,))
            if tokens is not None and len(need) < len(wanted):
                # The vectors it has are of blobs it counted before it missed changes:
                # count the current ones afresh (what embedding counts comes on top).
                needed = set(need)
                have = [b for b in wanted if b not in needed]
                for chunk in _chunks(have):
                    _count(conn, model_id, (tokens(t) for t in _texts(conn, chunk).values()), +1)
            conn.execute(
                "UPDATE vector_models SET live = ? WHERE id = ?",
                (len(wanted) - len(need), model_id),
            )
        conn.execute("DELETE FROM vector_gone WHERE model = ?", (model_id,))
        expect = _live(conn, model_id) + len(need)
        trained = False
        # Embedding most of a model (a first embedding): every vector goes to list 0 and the
        # records are written again at the end with each in its list. Appending each batch
        # to its lists would rewrite the last record of most lists a batch (at 1M, 2,000
        # lists and a thousand batches: gigabytes written for what the end rewrites anyway).
        staged = len(need) >= max(COMPACT_FROM, COMPACT_SHARE * expect)
        for start in range(0, len(need), SYNC_BATCH):
            chunk = need[start : start + SYNC_BATCH]
            texts = _texts(conn, chunk)
            present = [b for b in chunk if b in texts]
            if not present:
                continue
            batch = [texts[b] for b in present]
            counting = getattr(embedder, "embed_counting", None)
            if counting is not None:
                vecs, counts = counting(batch)
                _add_counts(conn, model_id, counts)
            else:
                vecs = embedder.embed(batch)
                if tokens is not None:
                    _count(conn, model_id, (tokens(t) for t in batch), +1)
            written += store_vectors(
                conn, model, zip(present, encode(vecs), strict=True), dim=embedder.dim,
                staged=staged,
            )
            if progress is not None:
                progress(written, len(need))
            if (
                not trained
                and expect >= IVF_FROM
                and _live(conn, model_id) >= min(expect, sample_size(expect))
                and train_due(conn, model, expect=expect)
            ):
                # Lists trained on the sample stored so far (blobs come in id order, which
                # is random), sized for the whole: the rest go straight to their lists.
                train(conn, model, expect=expect)
                trained = True
        if conn.execute("SELECT 1 FROM vector_pending LIMIT 1").fetchone() is not None:
            # Every other model that was complete has now missed these blobs.
            conn.execute("UPDATE vector_models SET complete = 0 WHERE model != ?", (model,))
            conn.execute("DELETE FROM vector_pending")
        _bump(conn, model, embedder.dim)
        conn.execute("UPDATE vector_models SET complete = 1 WHERE model = ?", (model,))
        found = _model(conn, model)
        assert found is not None
        if train_due(conn, model):
            train(conn, model)
        elif staged or written >= max(COMPACT_FROM, COMPACT_SHARE * found.n) or (
            found.n - found.live > max(DEAD_FROM, DEAD_SHARE * found.live)
        ):
            # Most of the model's rows were just written (its first embedding, after lists
            # were trained on the sample): in key order they take less room, and staged
            # vectors go to their lists. Or many are of blobs gone or repeated: they go.
            _rewrite(
                conn, model_id, (lambda codes: _assign(conn, model_id, codes)) if staged
                else None, purge=True,
            )
    return written


def _live(conn: sqlite3.Connection, model_id: int) -> int:
    row = conn.execute("SELECT live FROM vector_models WHERE id = ?", (model_id,)).fetchone()
    return int(row[0]) if row else 0


def _stored(conn: sqlite3.Connection, model_id: int) -> int:
    row = conn.execute("SELECT n FROM vector_models WHERE id = ?", (model_id,)).fetchone()
    return int(row[0]) if row else 0


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


def _add_counts(conn: sqlite3.Connection, model_id: int, counts: NDArray[Any]) -> None:
    """Add an array of per-token document counts (index = token id)."""
    import numpy as np

    tokens = np.flatnonzero(counts)
    conn.executemany(
        "INSERT INTO vector_df (model, token, df) VALUES (?, ?, ?) "
        "ON CONFLICT(model, token) DO UPDATE SET df = df + excluded.df",
        ((model_id, int(t), int(counts[t])) for t in tokens),
    )


@dataclass
class _Weights:
    gen: int
    idf: NDArray[Any] | None


_weights: dict[tuple[str, str], _Weights] = {}


def idf_weights(conn: sqlite3.Connection, model: str) -> NDArray[Any] | None:
    """Inverse document frequency of each token id over the blobs with vectors of
    ``model`` (log((N + 1) / (df + 0.5)), floored at 0), or None without counts."""
    import numpy as np

    row = conn.execute("SELECT id, gen FROM vector_models WHERE model = ?", (model,)).fetchone()
    if row is None:
        return None
    key = (_db_key(conn), model)
    cached = _weights.get(key)
    if cached is not None and cached.gen == int(row[1]):
        return cached.idf
    counts = conn.execute(
        "SELECT token, df FROM vector_df WHERE model = ?", (int(row[0]),)
    ).fetchall()
    idf = None
    if counts:
        total = _live(conn, int(row[0]))
        top = max(t for t, _ in counts) + 1
        df = np.zeros(top, dtype=np.float64)
        for token, n in counts:
            df[token] = n
        idf = np.maximum(np.log((total + 1) / (df + 0.5)), 0.0).astype(np.float32)
    _weights[key] = _Weights(int(row[1]), idf)
    return idf


def _texts(conn: sqlite3.Connection, blobs: Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for chunk in _chunks(blobs):
        marks = ",".join("?" * len(chunk))
        for blob, title, body in conn.execute(
            f"SELECT blob, title, body FROM memories WHERE blob IN ({marks})", tuple(chunk)
        ):
            out.setdefault(blob, embed_text(title, body or ""))
    return out


RETRY_AFTER = 60.0
"""Seconds semantic recall is skipped in this process after its embedder failed (an
endpoint that is down must not cost every query its timeout)."""
_failed_until: dict[str, float] = {}


def nearest(
    index: Index, text: str, k: int, *, embedder: Embedder | None = None
) -> list[tuple[int, float]]:
    """The current memories nearest ``text`` in meaning: (``memories.rowid``, cosine), best
    first, at most ``k`` blobs (a blob two memories share gives both rows).

    The store's embedder comes from the user's local configuration (or the offline
    default); with none available the answer is empty and recall stays lexical. Pending
    memories are embedded first (:func:`sync`). Never raises for an embedder's or the
    vector tables' failure: it logs one line and answers nothing, and recall stays lexical.
    """
    import time

    if embedder is None:
        from gitmem.store.embed import get_embedder

        embedder = get_embedder(str(index.db.gitdir))
        if embedder is None:
            return []
    from gitmem.base.errors import EmbedderError

    if _failed_until.get(embedder.name, 0.0) > time.monotonic():
        return []
    try:
        try:
            sync(index, embedder)
            return nearest_in(index.connect(), text, k, embedder)
        except IndexDamagedError as exc:
            # A record gitmem did not write: the vector tables are derived, so they are
            # made again (the next catch-up refills them) and this query embeds afresh.
            log.warning("index: %s; its vectors are rebuilt", exc)
            reset(index)
            sync(index, embedder)
            return nearest_in(index.connect(), text, k, embedder)
    except (EmbedderError, IndexDamagedError, ValueError, sqlite3.OperationalError) as exc:
        # ValueError: a model that changed dimension under the same name; OperationalError:
        # a read-only or locked index. The lexical answer stands alone.
        _failed_until[embedder.name] = time.monotonic() + RETRY_AFTER
        log.warning("semantic recall skipped for %.0f s: %s", RETRY_AFTER, exc)
        return []


def reset(index: Index) -> None:
    """Have the next catch-up drop the vector tables and fill them again (every current
    memory pending: the next recall embeds them all), as for a new provider version."""
    conn = index.connect()
    with index.writing(conn):
        conn.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
            (f"provider:{VECTORS.name}", f"{VECTORS.version} damaged"),
        )
    clear_cache()


def complete(conn: sqlite3.Connection, model: str) -> bool:
    """Whether every current memory has a vector of ``model``: :func:`nearest_in` can then
    answer on a read-only connection, with nothing to embed first."""
    return _complete(conn, model)


def nearest_in(
    conn: sqlite3.Connection, text: str, k: int, embedder: Embedder
) -> list[tuple[int, float]]:
    """:func:`nearest` on a connection whose vectors are current (:func:`complete`): reads
    only. Raises what the embedder or SQLite raises."""
    weighted = getattr(embedder, "embed_weighted", None)
    idf = idf_weights(conn, embedder.name) if weighted is not None else None
    # A static embedder's query weighs each token by how rare it is among the memories:
    # on LoCoMo's tuning split that took the embedder alone from 0.33 to 0.51 recall@5.
    query = weighted(text, idf) if weighted is not None and idf is not None else (
        embedder.embed([text])[0]
    )
    # The records may hold vectors of blobs no memory holds any more (until the next
    # training or compaction): ask for more than k while the memories found are fewer.
    found = _model(conn, embedder.name)
    extra = 0 if found is None else max(0, found.n - found.live)
    want = k + min(extra, k)
    while True:
        hits = top_k(conn, embedder.name, query, want)
        by_blob: dict[str, list[int]] = {}
        for chunk in _chunks([b for b, _ in hits]):
            marks = ",".join("?" * len(chunk))
            for rowid, blob in conn.execute(
                f"SELECT rowid, blob FROM memories WHERE blob IN ({marks}) ORDER BY rowid",
                tuple(chunk),
            ):
                by_blob.setdefault(blob, []).append(int(rowid))
        live = [(blob, cosine) for blob, cosine in hits if blob in by_blob]
        if len(live) >= k or len(hits) < want or want >= k + extra:
            break
        want = min(k + extra, want * 4)
    return [(rowid, cosine) for blob, cosine in live[:k] for rowid in by_blob[blob]]
