"""Loggers that import :mod:`logging` only when a record could go somewhere.

Importing :mod:`logging` costs every command ~5 ms (it brings ``traceback``, ``string``
and ``weakref``), and a command that goes well logs nothing a user sees. So gitmem's
modules log through :func:`get`, whose loggers are the ``logging`` loggers of the same
names, made on first use:

- ``warning``, ``error`` and ``exception`` always go to ``logging`` (importing it);
- ``debug`` and ``info`` go to ``logging`` only once something has imported it. Until then
  nothing can have configured it: no handler exists and the level is the default
  WARNING, so ``logging`` itself would drop them. An application, a test runner or
  ``gitmem --debug`` that imports and configures ``logging`` sees every record as before.

:func:`when_logging` defers setting up ``logging`` (the command line's handler that
prints warnings as ``gitmem: warning: ...``) to the moment the first record needs it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import logging

_hooks: list[Callable[[], None]] = []
_live = False
"""True once a logger was made: hooks given later run at once."""


def when_logging(hook: Callable[[], None]) -> None:
    """Run ``hook`` (which may import and configure :mod:`logging`) before the first
    gitmem record reaches :mod:`logging`, or now if one already has. Run once per hook;
    a hook given twice (a command line run twice in one process) runs once."""
    if _live:
        hook()
    elif hook not in _hooks:
        _hooks.append(hook)


def _materialize(name: str) -> logging.Logger:
    global _live
    import logging

    if not _live:
        _live = True
        while _hooks:
            _hooks.pop(0)()
    return logging.getLogger(name)


class Logger:
    """A ``logging.Logger`` by name, made when a record first needs it. Records name
    the caller's line (``stacklevel=2``), not this wrapper's."""

    __slots__ = ("_real", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self._real: logging.Logger | None = None

    def _logger(self) -> logging.Logger:
        if self._real is None:
            self._real = _materialize(self.name)
        return self._real

    def debug(self, msg: str, *args: Any, **kwargs: Any) -> None:
        if self._real is not None or "logging" in sys.modules:
            self._logger().debug(msg, *args, stacklevel=2, **kwargs)

    def info(self, msg: str, *args: Any, **kwargs: Any) -> None:
        if self._real is not None or "logging" in sys.modules:
            self._logger().info(msg, *args, stacklevel=2, **kwargs)

    def warning(self, msg: str, *args: Any, **kwargs: Any) -> None:
        self._logger().warning(msg, *args, stacklevel=2, **kwargs)

    def error(self, msg: str, *args: Any, **kwargs: Any) -> None:
        self._logger().error(msg, *args, stacklevel=2, **kwargs)

    def exception(self, msg: str, *args: Any, **kwargs: Any) -> None:
        self._logger().exception(msg, *args, stacklevel=2, **kwargs)


_loggers: dict[str, Logger] = {}


def get(name: str) -> Logger:
    """The logger called ``name`` (one object per name, like ``logging.getLogger``)."""
    logger = _loggers.get(name)
    if logger is None:
        logger = _loggers[name] = Logger(name)
    return logger
