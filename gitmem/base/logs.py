"""Loggers that import :mod:`logging` (a cost on every command) only when a record could go
somewhere: warnings and errors always; debug and info once something imported it.
:func:`when_logging` defers the command line's handler to the first record.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import logging

_hooks: list[Callable[[], None]] = []
_live = False  # once a logger was made, hooks given later run at once


def when_logging(hook: Callable[[], None]) -> None:
    """Run ``hook`` once, before the first record reaches :mod:`logging` (now if one has)."""
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
    """A ``logging.Logger`` by name, made when a record first needs it."""

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

    def exception(self, msg: str, *args: Any, **kwargs: Any) -> None:
        self._logger().exception(msg, *args, stacklevel=2, **kwargs)


_loggers: dict[str, Logger] = {}


def get(name: str) -> Logger:
    """The logger called ``name`` (one object per name, like ``logging.getLogger``)."""
    return _loggers.setdefault(name, Logger(name))
