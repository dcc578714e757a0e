"""The memory file: the one encoder (:func:`encode`; :func:`check` for a file an import
copies byte for byte) and the one decoder (:func:`decode`) every writer and reader uses."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gitmem.base.errors import GitmemError, InvalidInputError, InvalidMemoryError, TooLargeError
from gitmem.format import codec, schema
from gitmem.format.layout import expected_path_form, id_from_path, memory_path
from gitmem.format.model import (
    DERIVED_KEYS,
    Memory,
    Scope,
    check_window,
    memory_from_document,
)
from gitmem.format.yamlbounds import MAX_FRONT_MATTER_BYTES

if TYPE_CHECKING:
    from gitmem.format.secrets import SecretPolicy


def encode(memory: Memory, *, max_body_bytes: int, policy: SecretPolicy | None = None) -> bytes:
    """The file that stores ``memory``, or the error why it cannot be written (credentials
    under ``policy``, checked before anything that could echo one; None: allowed)."""
    metadata = memory.to_metadata()
    codec.check_writable_depth(metadata)
    path = memory.path or memory_path(memory.id)
    if policy is not None:
        from gitmem.format import secrets

        secrets.refuse_memory(
            memory_id=memory.id,
            metadata=metadata,
            body="",  # scanned with the whole file below: no check before that quotes it
            policy=policy,
            path=path,
        )
    schema.validate(metadata)
    check_window(memory.valid_from, memory.valid_until)
    doc = memory.document or codec.Document({}, "")
    text = codec.serialize(doc.with_changes(metadata, memory.body))
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInputError(
            f"{memory.id} holds a lone surrogate (character {exc.start}), which UTF-8 cannot store"
        ) from None
    # Not named by its id: a new memory's id was never stored.
    _check_sizes("the body", len(data), len(memory.body.encode("utf-8")), max_body_bytes)
    # Writes refuse whatever reads cannot read: the file is parsed back as every reader
    # parses it (depth, size, values YAML does not carry exactly).
    codec.check_reads_back(text, metadata, memory.body)
    if policy is not None:
        from gitmem.format import secrets

        secrets.refuse(text, path, policy)
    return data


def check(
    data: bytes, *, what: str, max_body_bytes: int, policy: SecretPolicy | None = None
) -> Memory:
    """The memory in a file an import stores byte for byte, held to what :func:`encode`
    refuses (credentials first)."""
    text = codec.decode(data, what=what)
    parsed = codec.parse(text)
    if policy is not None:
        from gitmem.format import secrets

        secrets.refuse_memory(memory_id=None, metadata=parsed.metadata, body="", policy=policy)
        secrets.refuse(text, what, policy)
    memory_id = parsed.metadata.get("id")
    if not isinstance(memory_id, str):
        raise InvalidMemoryError(f"{what} has no id in its front-matter")
    try:
        memory = decode(data, memory_path(memory_id))
    except InvalidMemoryError as exc:
        raise InvalidMemoryError(f"{what}: {exc}") from None
    body_size = len(memory.body.encode("utf-8"))
    _check_sizes(f"the body of {memory_id}", len(data), body_size, max_body_bytes)
    return memory


def _check_sizes(what: str, size: int, body_size: int, max_body_bytes: int) -> None:
    if body_size > max_body_bytes:
        raise TooLargeError(
            f"{what} is {body_size} bytes, over the store's limit of {max_body_bytes}",
            hint="split the memory, or raise limits.max_body_bytes for this store in your own "
            "gitmem configuration (stores: {<git dir>: {limits: ...}}; gitmem.yaml only lowers it)",
        )
    # The reader refuses front-matter over its bound; never write a file it would refuse.
    head_size = size - body_size
    if head_size > MAX_FRONT_MATTER_BYTES:
        raise TooLargeError(
            f"the front-matter is about {head_size} bytes, over the limit of "
            f"{MAX_FRONT_MATTER_BYTES}",
            hint="keep large content in the body, not in front-matter fields",
        )


def decode(
    data: bytes,
    path: str,
    *,
    what: str | None = None,
    require_memory_path: bool = True,
    store_scope: Scope | None = None,
) -> Memory:
    """The memory in ``data``, stored at ``path``; raises :class:`InvalidMemoryError`
    (messages start with ``what``). ``require_memory_path=False``: any path will do."""
    label = f"{what} " if what else ""
    expected = id_from_path(path)
    if expected is None and require_memory_path:
        raise InvalidMemoryError(f"{label}not at a memory path ({expected_path_form(path)})")
    text = codec.decode(data, what=path)
    if "\x00" in text:
        # The write path refuses NUL (memories are text; git would call the file binary),
        # so a planted one is a broken file, not a memory to carry forward.
        raise InvalidMemoryError(f"{label}contains a NUL byte; memories are text")
    doc = codec.parse(text)
    if not doc.has_front_matter:
        raise InvalidMemoryError(f"{label}has no front-matter (it must start with a '---' line)")
    schema.validate(doc.metadata, what=path)
    memory = memory_from_document(doc, path=path, store_scope=store_scope)
    if expected is not None and memory.id != expected:
        raise InvalidMemoryError(f"{label}carries id {memory.id!r}, but its path says {expected!r}")
    return memory


def file_text(memory: Memory) -> str:
    """The memory's file as it is stored (front-matter and body, byte for byte)."""
    doc = memory.document or codec.Document(memory.to_metadata(), memory.body)
    return codec.serialize(doc)


def rendered_text(memory: Memory) -> str:
    """The memory's file with its derived ``updated_at`` and ``version`` written in after
    ``created_at`` (what show prints and an export writes)."""
    doc = memory.document or codec.Document({}, "")
    return codec.serialize(doc.with_changes(memory.rendered_metadata(), memory.body))


def carries_derived(memory: Memory) -> list[str]:
    """The derived keys the memory's file carries (none in a file this gitmem wrote)."""
    meta = memory.document.metadata if memory.document is not None else {}
    return [key for key in DERIVED_KEYS if key in meta]


def without_derived(data: bytes) -> bytes:
    """``data`` without its ``updated_at``/``version`` lines, every other byte kept (migrate,
    import)."""
    try:
        doc = codec.parse(codec.decode(data))
    except GitmemError:
        return data
    if not doc.has_front_matter or not any(key in doc.metadata for key in DERIVED_KEYS):
        return data
    meta = {k: v for k, v in doc.metadata.items() if k not in DERIVED_KEYS}
    return codec.serialize(doc.with_changes(meta, doc.body)).encode("utf-8")


def read(data: bytes | None, path: str) -> tuple[Memory | None, str | None]:
    """The memory in ``data`` (None when there is no file), or why it is not one."""
    if data is None:
        return None, None
    try:
        return decode(data, path), None
    except (GitmemError, ValueError, TypeError, KeyError) as exc:
        return None, f"{path}: {exc}"
