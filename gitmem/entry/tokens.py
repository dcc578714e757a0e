"""The bearer tokens of gitmem's HTTP servers (``gitmem mcp --http``, ``gitmem serve``): one
secret per store and server, kept in the user's state directory, never in the store."""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import stat
from pathlib import Path

from gitmem.base import paths
from gitmem.base.errors import InvalidInputError, StoreError
from gitmem.store.core import Store

TOKEN_ENV = "GITMEM_MCP_TOKEN"
TOKEN_DIR = "mcp-tokens"
"""In the user's state directory (:func:`token_path`): one bearer token per store."""

MIN_TOKEN = 16


def token_path(store: Store, folder: str = TOKEN_DIR) -> Path:
    """The bearer token file for ``store``: ``<user state dir>/gitmem/<folder>/<hash of its
    git directory>``, never in the store (a bare store committed in a project carries it)."""
    key = hashlib.sha256(os.fsencode(store.db().gitdir.resolve())).hexdigest()[:32]
    return paths.user_dir("state") / folder / key


def http_token(
    store: Store, *, env: str = TOKEN_ENV, folder: str = TOKEN_DIR
) -> tuple[str, Path | None]:
    """The bearer token clients must send: ``$env`` (``$GITMEM_MCP_TOKEN``), else the one at
    :func:`token_path` (made on first use, mode 0600). A token file that is not the user's
    own regular file, or that others may read, is refused. Returns the token and the file it
    is in (None when it came from the environment). ``gitmem serve`` keeps its own."""
    given = os.environ.get(env)
    if given is not None:
        if len(given) < MIN_TOKEN:
            raise InvalidInputError(f"${env} must be at least {MIN_TOKEN} characters")
        return given, None
    path = token_path(store, folder)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as out:
            out.write(secrets.token_urlsafe(32) + "\n")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise StoreError(f"cannot read the token file {path}: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fh.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
            raise StoreError(f"{path} is not a file of yours: it is not used as a token")
        if info.st_mode & 0o077:
            raise StoreError(
                f"{path} can be read by others (mode {stat.S_IMODE(info.st_mode):04o}): it is "
                "not used as a token",
                hint=f"delete it (a new token is made) or chmod 600 {path}",
            )
        token = fh.read(1024).decode("ascii", "replace").strip()
    if len(token) < MIN_TOKEN:
        raise StoreError(f"{path} holds no usable token; delete it and a new one is made")
    return token, path
