"""git's on-disk formats read in plain Python: a branch's tip and an object's bytes.

Everything else in gitmem reads git through pygit2, whose import alone costs a command
line process more than the whole answer of ``gitmem ls`` (about 60 ms of 100). The read
commands' fast path (:mod:`gitmem.store.quick`) needs only two things from git when the
derived index is current: which commit the branch is at, and, for ``show``, the bytes of
one blob. Both are small, stable formats (``gitrepository-layout(5)``,
``gitformat-pack(5)``), read here without libgit2.

Every function answers ``None`` where it is not sure (a ref it cannot resolve, an object
format other than SHA-1, an object it cannot find or decode, alternates, a damaged
pack): the caller then takes the ordinary path, which reads through libgit2 and reports
problems properly. What a store holds is untrusted, so a malformed file never raises
here and never makes this module loop or recurse without bound.
"""

from __future__ import annotations

import os
import stat
import struct
import zlib
from pathlib import Path
from typing import BinaryIO

__all__ = ["blob", "read_regular", "ref_target", "symbolic_head"]

_HEX = frozenset("0123456789abcdef")
_MAX_SYMREF_DEPTH = 5
_MAX_DELTA_DEPTH = 10_000  # git's own writers stop at 4,095 (pack.depth's ceiling)
_OBJ_BLOB, _OFS_DELTA, _REF_DELTA = 3, 6, 7
_TYPE_NAMES = {1: b"commit", 2: b"tree", 3: b"blob", 4: b"tag"}


def _is_oid(text: str) -> bool:
    return len(text) == 40 and _HEX.issuperset(text)


def _open(path: Path) -> BinaryIO:
    """``path`` opened for reading if it is a regular file and not a symbolic link: a FIFO
    or device planted in a copied store must not make a read command wait forever, and a
    link must not make it read outside the store (OSError otherwise; the full path decides)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: Path) -> bytes | None:
    """The bytes of ``path`` when it is a regular file that can be read; else None."""
    try:
        with _open(path) as fh:
            return fh.read()
    except OSError:
        return None


def symbolic_head(gitdir: Path) -> str | None:
    """The ref ``HEAD`` names (``refs/heads/main``), or None when it is detached or unreadable."""
    data = read_regular(gitdir / "HEAD")
    if data is None or not data.startswith(b"ref: "):
        return None
    try:
        return data[5:].decode("utf-8").strip()
    except UnicodeDecodeError:
        return None


def ref_target(gitdir: Path, name: str) -> str | None:
    """The object id ``name`` (``refs/heads/main``) points at, following symbolic refs, as
    git resolves it: the loose file first, then ``packed-refs``. None when it does not exist
    or cannot be read with certainty (a reftable repository has neither)."""
    for _ in range(_MAX_SYMREF_DEPTH):
        if not name.startswith("refs/") or ".." in name or "\\" in name:
            return None
        data = read_regular(gitdir / name)
        if data is None:
            return _packed_ref(gitdir, name)
        try:
            text = data.decode("ascii").strip()
        except UnicodeDecodeError:
            return None
        if text.startswith("ref: "):
            name = text[5:].strip()
            continue
        return text if _is_oid(text) else None
    return None


def _packed_ref(gitdir: Path, name: str) -> str | None:
    data = read_regular(gitdir / "packed-refs")
    if data is None:
        return None
    wanted = name.encode("utf-8", "surrogateescape")
    for line in data.splitlines():
        if line.startswith((b"#", b"^")):
            continue
        oid, _, ref = line.partition(b" ")
        if ref == wanted:
            text = oid.decode("ascii", "replace")
            return text if _is_oid(text) else None
    return None


# -- objects -----------------------------------------------------------------------------


def blob(gitdir: Path, oid: str) -> bytes | None:
    """The content of blob ``oid`` in the repository at ``gitdir``: loose or in a pack
    (deltas resolved); None when this module cannot answer for certain."""
    if not _is_oid(oid) or (gitdir / "objects" / "info" / "alternates").exists():
        return None
    try:
        found = _loose(gitdir, oid)
        if found is None:
            found = _packed(gitdir, bytes.fromhex(oid), 0)
    except (OSError, ValueError, IndexError, struct.error, zlib.error, MemoryError, RecursionError):
        # RecursionError: a chain of ref deltas deeper than Python recurses (a crafted pack)
        return None
    if found is None or found[0] != _OBJ_BLOB:
        return None
    return found[1]


def _loose(gitdir: Path, oid: str) -> tuple[int, bytes] | None:
    data = read_regular(gitdir / "objects" / oid[:2] / oid[2:])
    if data is None:
        return None
    raw = zlib.decompress(data)
    header, nul, body = raw.partition(b"\0")
    kind, _, size = header.partition(b" ")
    if not nul or not size.isdigit() or int(size) != len(body):
        return None
    for number, name in _TYPE_NAMES.items():
        if name == kind:
            return number, body
    return None


def _packed(gitdir: Path, sha: bytes, depth: int) -> tuple[int, bytes] | None:
    pack_dir = gitdir / "objects" / "pack"
    try:
        indexes = sorted(p for p in pack_dir.iterdir() if p.suffix == ".idx")
    except OSError:
        return None
    for idx in indexes:
        offset = _idx_offset(idx, sha)
        if offset is not None:
            with _open(idx.with_suffix(".pack")) as pack:
                return _entry(gitdir, pack, offset, depth)
    return None


def _idx_offset(path: Path, sha: bytes) -> int | None:
    """The pack offset of ``sha`` from a version-2 pack index (binary search)."""
    with _open(path) as fh:
        if fh.read(8) != b"\xfftOc\x00\x00\x00\x02":
            raise ValueError("not a version 2 pack index")
        fanout = struct.unpack(">256I", fh.read(1024))
        total = fanout[255]
        low = fanout[sha[0] - 1] if sha[0] else 0
        high = fanout[sha[0]]
        names_at = 8 + 1024
        while low < high:
            mid = (low + high) // 2
            fh.seek(names_at + 20 * mid)
            name = fh.read(20)
            if name == sha:
                break
            if name < sha:
                low = mid + 1
            else:
                high = mid
        else:
            return None
        fh.seek(names_at + 24 * total + 4 * mid)  # past the names and the CRCs
        (offset,) = struct.unpack(">I", fh.read(4))
        if offset & 0x80000000:
            fh.seek(names_at + 28 * total + 8 * (offset & 0x7FFFFFFF))
            (offset,) = struct.unpack(">Q", fh.read(8))
        return int(offset)


def _entry(gitdir: Path, pack: BinaryIO, offset: int, depth: int) -> tuple[int, bytes] | None:
    """The (type, bytes) of the pack entry at ``offset``, deltas applied."""
    chain: list[bytes] = []
    while True:
        if depth + len(chain) > _MAX_DELTA_DEPTH:
            return None
        pack.seek(offset)
        header = pack.read(32)
        byte = header[0]
        kind, size, shift, used = (byte >> 4) & 7, byte & 15, 4, 1
        while byte & 0x80:
            byte = header[used]
            size |= (byte & 0x7F) << shift
            shift, used = shift + 7, used + 1
        base_offset: int | None = None
        base_sha: bytes | None = None
        if kind == _OFS_DELTA:
            byte = header[used]
            back, used = byte & 0x7F, used + 1
            while byte & 0x80:
                byte = header[used]
                back, used = ((back + 1) << 7) | (byte & 0x7F), used + 1
            if not 0 < back <= offset:
                return None
            base_offset = offset - back
        elif kind == _REF_DELTA:
            base_sha, used = header[used : used + 20], used + 20
        elif kind not in _TYPE_NAMES:
            return None
        pack.seek(offset + used)
        data = _inflate(pack, size)
        if data is None:
            return None
        if base_offset is not None:
            chain.append(data)
            offset = base_offset
            continue
        if base_sha is not None:
            chain.append(data)
            base = _loose(gitdir, base_sha.hex()) or _packed(gitdir, base_sha, depth + len(chain))
            if base is None:
                return None
            kind, data = base
        for delta in reversed(chain):
            data = _apply_delta(data, delta)
        return kind, data


def _inflate(pack: BinaryIO, size: int) -> bytes | None:
    """The zlib stream at the file's position, which must inflate to ``size`` bytes."""
    inflater = zlib.decompressobj()
    out = bytearray()
    while not inflater.eof:
        chunk = pack.read(65536)
        if not chunk:
            return None
        out += inflater.decompress(chunk)
        if len(out) > size:  # bounds what a lying header can make this hold
            return None
    return bytes(out) if len(out) == size else None


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at


def _apply_delta(base: bytes, delta: bytes) -> bytes:
    """git's delta format: the source and result sizes, then copy and insert instructions."""
    source_size, at = _varint(delta, 0)
    result_size, at = _varint(delta, at)
    if source_size != len(base):
        raise ValueError("delta base size mismatch")
    out = bytearray()
    while at < len(delta):
        op = delta[at]
        at += 1
        if op & 0x80:
            start = length = 0
            for bit in range(4):
                if op & (1 << bit):
                    start |= delta[at] << (8 * bit)
                    at += 1
            for bit in range(3):
                if op & (0x10 << bit):
                    length |= delta[at] << (8 * bit)
                    at += 1
            length = length or 0x10000
            if start + length > len(base):
                raise ValueError("delta copies past its base")
            out += base[start : start + length]
        elif op:
            out += delta[at : at + op]
            at += op
        else:
            raise ValueError("delta opcode 0")
    if len(out) != result_size:
        raise ValueError("delta result size mismatch")
    return bytes(out)
