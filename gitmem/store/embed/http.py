"""Embedders behind an HTTP endpoint (OpenAI-compatible ``/v1/embeddings`` or Ollama): a timeout
on every request, no redirects, one-line errors without the credentials."""

from __future__ import annotations

import ipaddress
import json
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from gitmem.base.errors import EmbedderError

DEFAULT_URLS = {
    "openai": "https://api.openai.com/v1/embeddings",
    "ollama": "http://127.0.0.1:11434",
}
DEFAULT_KEY_ENV = {"openai": "OPENAI_API_KEY", "ollama": ""}
DEFAULT_TIMEOUT = 30.0
DEFAULT_BATCH = 64
MAX_RESPONSE = 256 << 20
"""Bytes of one response read at most: a broken or hostile server cannot fill memory."""
MAX_DIM = 16_384


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # a 3xx then surfaces as an HTTPError


def redact(url: str) -> str:
    """The URL without user, password or query string (they may hold credentials)."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return "<malformed url>"
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path, "", ""))


def _loopback(host: str | None) -> bool:
    try:
        return host == "localhost" or ipaddress.ip_address(host or "").is_loopback
    except ValueError:
        return False


class HttpEmbedder:
    """Texts are sent in batches; vectors come back L2-normalised as float32. Made from a
    checked configuration section (schemas/embedder.schema.json: ``provider: openai`` or
    ``ollama``)."""

    def __init__(self, spec: Mapping[str, Any]) -> None:
        if "api_key" in spec:
            # A key written into a YAML file is one copy too many; the variable keeps it out.
            raise EmbedderError(
                "put the embedder's API key in an environment variable and name it with "
                "'api_key_env', not in the config file"
            )
        self.provider = provider = str(spec["provider"])
        self.url = url = str(spec.get("url", DEFAULT_URLS[provider]))
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise EmbedderError(f"embedder url {redact(url)!r} is not an http(s) URL")
        if provider == "ollama" and not parts.path.rstrip("/").endswith("/api/embed"):
            self.url = url.rstrip("/") + "/api/embed"
        self.model = str(spec["model"]).strip()
        self.timeout = float(spec.get("timeout", DEFAULT_TIMEOUT))
        self.batch = int(spec.get("batch", DEFAULT_BATCH))
        key_env = str(spec.get("api_key_env", DEFAULT_KEY_ENV[provider]))
        self._api_key = os.environ.get(key_env) if key_env else None
        handlers: list[urllib.request.BaseHandler] = [_NoRedirect()]
        if _loopback(parts.hostname):  # a local server is reached directly, never by proxy
            handlers.append(urllib.request.ProxyHandler({}))
        self._opener = urllib.request.build_opener(*handlers)
        dim = int(spec.get("dim") or 0)
        self.name = str(spec.get("name") or f"{provider}:{self.model}" + (f":{dim}" if dim else ""))
        # Without a configured dimension, the endpoint is asked once.
        self.dim = dim or int(self._request(["dimension probe"], expect_dim=None).shape[1])

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(texts), self.batch):
            chunk = [str(t) for t in texts[start : start + self.batch]]
            out[start : start + len(chunk)] = self._request(chunk, expect_dim=self.dim)
        return out

    def _request(self, texts: list[str], *, expect_dim: int | None) -> NDArray[np.float32]:
        where = f"{self.provider} embedder at {redact(self.url)}"
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        body = json.dumps({"model": self.model, "input": texts}).encode("utf-8")
        request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                raw = response.read(MAX_RESPONSE + 1)
        except urllib.error.HTTPError as exc:
            detail = _error_detail(exc)
            raise EmbedderError(f"{where} answered HTTP {exc.code}{detail}") from None
        except (TimeoutError, urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            if isinstance(reason, TimeoutError) or "timed out" in str(reason):
                raise EmbedderError(
                    f"{where} did not answer within {self.timeout:g} s"
                ) from None
            raise EmbedderError(f"{where} is unreachable: {reason}") from None
        if len(raw) > MAX_RESPONSE:
            raise EmbedderError(f"{where} sent more than {MAX_RESPONSE >> 20} MB")
        try:
            data = json.loads(raw)
        except ValueError:
            raise EmbedderError(f"{where} did not answer with JSON") from None
        vectors = self._vectors(data, where)
        if len(vectors) != len(texts):
            raise EmbedderError(
                f"{where} returned {len(vectors)} vectors for {len(texts)} texts"
            )
        return _matrix(vectors, expect_dim, where)

    def _vectors(self, data: Any, where: str) -> list[Any]:
        if self.provider == "ollama":
            found = data.get("embeddings") if isinstance(data, dict) else None
            if not isinstance(found, list):
                raise EmbedderError(f"{where}: the answer has no 'embeddings' list")
            return found
        items = data.get("data") if isinstance(data, dict) else None
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            raise EmbedderError(f"{where}: the answer has no 'data' list of embeddings")
        # OpenAI's answer carries each vector's input position; order by it.
        if all(isinstance(i.get("index"), int) for i in items):
            items = sorted(items, key=lambda i: int(i["index"]))
        return [i.get("embedding") for i in items]


def _error_detail(exc: urllib.error.HTTPError) -> str:
    try:
        text = exc.read(400).decode("utf-8", "replace")
    except OSError:
        return ""
    text = " ".join(text.split())[:160]
    return f": {text}" if text else ""


def _matrix(vectors: list[Any], expect_dim: int | None, where: str) -> NDArray[np.float32]:
    try:
        matrix = np.asarray(vectors, dtype=np.float64)
    except (TypeError, ValueError):
        raise EmbedderError(f"{where} returned vectors that are not lists of numbers") from None
    dim = matrix.shape[1] if matrix.ndim == 2 else 0
    if not 0 < dim <= MAX_DIM:
        raise EmbedderError(f"{where} returned no vectors of 1 to {MAX_DIM} numbers")
    if expect_dim is not None and dim != expect_dim:
        raise EmbedderError(
            f"{where} returned {dim}-d vectors where {expect_dim}-d were expected "
            "(the model changed? run gitmem reindex)"
        )
    if not np.isfinite(matrix).all():
        raise EmbedderError(f"{where} returned a vector with NaN or infinity")
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    np.divide(matrix, norms, out=matrix, where=norms > 0)
    return matrix.astype(np.float32)
