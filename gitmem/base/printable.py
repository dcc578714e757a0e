"""Text read from a store, safe to print to a terminal or a model: a line break in a title
would print a line of its own ("SYSTEM: ..."), an escape sequence rewrites the screen, so
every character that is not printable is shown as an escape.
"""

from __future__ import annotations


def printable(text: str) -> str:
    """``text`` with each character that is not printable written as a Python string literal
    writes it (``\\n``, ``\\x1b``, ``\\u202e``)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


def printable_json(text: str) -> str:
    """JSON ``text`` with the characters JSON leaves as they are but that are not printable
    (DEL, C1 controls, format characters) escaped (``\\u202e``); its line breaks kept."""
    if text.isascii() and "\x7f" not in text:
        return text  # JSON escaped every other control character already
    return "\n".join(
        line if line.isprintable() else "".join(map(_json_char, line))
        for line in text.split("\n")
    )


def _json_char(char: str) -> str:
    if char.isprintable():
        return char
    units = char.encode("utf-16-be", "surrogatepass")
    return "".join(f"\\u{units[i]:02x}{units[i + 1]:02x}" for i in range(0, len(units), 2))
