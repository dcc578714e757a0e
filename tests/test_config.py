"""gitmem.yaml: the plain reader (no PyYAML) and the YAML reader always agree."""

from __future__ import annotations

import pytest

from gitmem.base.errors import InvalidMemoryError
from gitmem.format import config as config_module
from gitmem.format.codec import load_yaml
from gitmem.format.config import StoreConfig, initial_text
from gitmem.format.model import Scope


def _by_yaml(text: str) -> StoreConfig | str:
    """What the YAML reader makes of ``text`` (the plain reader bypassed), or its error."""
    saved = config_module._PLAIN_CONFIG_RE
    config_module._PLAIN_CONFIG_RE = config_module.re.compile(r"(?!)")  # matches nothing
    try:
        return StoreConfig.from_text(text)
    except InvalidMemoryError as exc:
        return f"error: {exc}"
    finally:
        config_module._PLAIN_CONFIG_RE = saved


def _read(text: str) -> StoreConfig | str:
    try:
        return StoreConfig.from_text(text)
    except InvalidMemoryError as exc:
        return f"error: {exc}"


@pytest.mark.parametrize("scope", list(Scope))
def test_the_initial_text_is_read_without_yaml(scope: Scope) -> None:
    text = initial_text(scope)
    assert config_module._PLAIN_CONFIG_RE.fullmatch(text) is not None
    assert _read(text) == _by_yaml(text)
    data, _ = load_yaml(text)
    assert StoreConfig.from_text(text).raw == data


@pytest.mark.parametrize(
    "text",
    [
        "format: 2\nscope: repo\nlimits:\n  max_body_bytes: 1048576\n",
        "# a\n# b: c\nformat: 3\nscope: user\nlimits:\n  max_body_bytes: 5\n",
        "format: 02\nscope: repo\nlimits:\n  max_body_bytes: 010\n",  # octal in YAML 1.1
        "format: 2\nscope: repo\nlimits:\n  max_body_bytes: 10 # ten\n",
        "format: 2\nscope: repo\nlimits:\n  max_body_bytes: 1_000\n",
        "#\x01\nformat: 2\nscope: repo\nlimits:\n  max_body_bytes: 10\n",  # unprintable
        "#\x85x\nformat: 2\nscope: repo\nlimits:\n  max_body_bytes: 10\n",
        "format: 2\r\nscope: repo\r\nlimits:\r\n  max_body_bytes: 10\r\n",
        "\ufeffformat: 2\nscope: repo\nlimits:\n  max_body_bytes: 10\n",
        "format: 2\nscope: team\nlimits:\n  max_body_bytes: 10\n",
        "format: 2\nscope: repo\nlimits:\n  max_body_bytes: 10\nlifecycle: {}\n",
        "format: 2\nscope: repo\nlimits:\n  max_body_bytes: 10",  # no final newline
        "format: 0\nscope: repo\nlimits:\n  max_body_bytes: 10\n",
    ],
)
def test_both_readers_agree(text: str) -> None:
    assert _read(text) == _by_yaml(text)
