"""Embedders (gitmem.store.embed): the offline default, the configuration, the HTTP providers.

The HTTP providers are tested against a real HTTP server on 127.0.0.1 started by the test,
with its errors, a timeout and wrong dimensions.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gitmem.base.errors import EmbedderError, install_command
from gitmem.store import embed
from gitmem.store.embed.http import HttpEmbedder, redact

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    embed.clear_cache()
    yield
    embed.clear_cache()


def _write_config(tmp_path: Path, text: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(textwrap.dedent(text))
    os.environ["GITMEM_CONFIG"] = str(path)


# -- the default embedder ----------------------------------------------------------------------


def test_default_embedder_loads_from_the_installed_package_with_the_network_unreachable(
    tmp_path: Path,
) -> None:
    """A fresh interpreter, every socket connection refused and recorded, an empty home (no
    model cache): the default embedder loads and embeds, and nothing tried to connect."""
    script = textwrap.dedent(
        """
        import socket, sys
        attempts = []
        def refuse(*args, **kwargs):
            attempts.append(repr(args)[:80])
            raise OSError("network is unreachable (blocked by the test)")
        socket.socket.connect = refuse
        socket.socket.connect_ex = refuse
        socket.create_connection = refuse
        socket.getaddrinfo = refuse
        import numpy as np
        from gitmem.store.embed import get_embedder
        e = get_embedder()
        assert e is not None, "no default embedder"
        v = e.embed(["The deploy target is staging", "Fixtures live in tests/conftest.py", ""])
        assert v.shape == (3, e.dim) and v.dtype == np.float32, v.shape
        norms = np.linalg.norm(v, axis=1)
        assert abs(norms[0] - 1) < 1e-5 and abs(norms[1] - 1) < 1e-5 and norms[2] == 0, norms
        print(e.name, e.dim, len(attempts))
        sys.exit(3 if attempts else 0)
        """
    )
    home = tmp_path / "home"
    home.mkdir()
    env = {
        **os.environ,
        "HOME": str(home),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "HF_HUB_OFFLINE": "1",
        "GITMEM_CONFIG": str(tmp_path / "absent.yaml"),
        "PYTHONPATH": str(REPO),
    }
    result = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    name, dim, attempts = result.stdout.split()
    assert name.startswith("wordllama-l2_supercat-256@") and dim == "256" and attempts == "0"
    # No model cache, no download folder.
    assert not [p for p in home.rglob("*") if p.is_file()]


def test_default_embedder_ranks_a_paraphrase_above_an_unrelated_memory() -> None:
    e = embed.load_embedder(None)
    assert e is not None
    memories = e.embed(["The deploy target is staging; production deploys need a tag",
                        "Fixtures live in tests/conftest.py"])
    question = e.embed(["how do we deploy to staging?"])[0]
    scores = memories @ question
    assert scores[0] > scores[1]
    again = e.embed(["Fixtures live in tests/conftest.py"])
    assert np.array_equal(again[0], memories[1])  # batch-independent


def test_default_embedder_handles_any_text() -> None:
    e = embed.load_embedder(None)
    assert e is not None
    texts = ["", " ", "\x00", "日本語のテキスト", "🙂" * 3000, "a" * 100_000, "x\ny\r\nz"]
    vectors = e.embed(texts)
    assert vectors.shape == (len(texts), e.dim)
    assert np.isfinite(vectors).all()
    assert e.embed([]).shape == (0, e.dim)


def _shipped_tokenizer() -> Any:
    from tokenizers import Tokenizer

    from gitmem.store.embed import static

    folder = static.package_dir()
    assert folder is not None
    return Tokenizer.from_file(str(folder / static.TOKENIZER))


def test_default_embedder_tokenizes_as_the_shipped_tokenizer_does() -> None:
    """The per-word cache gives the plain tokenizer's ids (runs of spaces aside, where the
    plain one merges "▁▁")."""
    from gitmem.store.embed import static

    plain = _shipped_tokenizer()
    texts = ["Caroline: I went to the LGBTQ support group yesterday!",
             "Fixtures live in tests/conftest.py; see `sample_user` and CamelCaseName.",
             "naïve café — 日本語のテキスト 🙂", "tabs\tand\nnewlines stay inside a piece", "x"]
    e = static.load_default()
    for text in texts * 2:  # the second round comes from the cache
        assert e.token_ids(text) == plain.encode(text, add_special_tokens=False).ids


def test_a_query_vector_in_python_is_numpys_mean_or_weighted_sum() -> None:
    """:meth:`embed_tokens` (Python floats, for a query) against numpy over the table."""
    from gitmem.store.embed import static

    e = static.load_default()
    table = e._tensor.array().astype(np.float64)
    weights = {t: 0.1 + (t % 7) / 3 for t in range(0, 32000, 3)}
    for text in ["how do we deploy to staging?", "日本語 🙂 x", "the the the", ""]:
        ids = e.token_ids(text)
        plain = np.asarray(e.embed_tokens(ids))
        assert np.allclose(plain, e.embed([text])[0], atol=1e-6)
        weighted = np.asarray(e.embed_tokens(ids, weights))
        expected = sum((weights.get(t, 0.0) * table[t] for t in ids), np.zeros(e.dim))
        norm = np.linalg.norm(expected)
        # Weights that leave nothing fall back to the plain mean.
        assert np.allclose(weighted, expected / norm if norm else plain, atol=1e-9)


# -- configuration --------------------------------------------------------------------------


def test_embedder_none_in_local_config_turns_embeddings_off(tmp_path: Path) -> None:
    _write_config(tmp_path, "embedder: none\n")
    assert embed.get_embedder() is None


def test_per_store_config_wins_over_the_global_section(tmp_path: Path) -> None:
    gitdir = tmp_path / "s.git"
    gitdir.mkdir()
    _write_config(
        tmp_path,
        f"""
        embedder: none
        stores:
          {gitdir.resolve()}:
            embedder: {{provider: default}}
        """,
    )
    assert embed.get_embedder() is None
    found = embed.get_embedder(str(gitdir))
    assert found is not None and found.dim == 256


def test_a_bad_config_gives_one_notice_and_lexical_recall(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _write_config(tmp_path, "embedder: {provider: telepathy}\n")
    with caplog.at_level(logging.WARNING, logger="gitmem.store.embed"):
        assert embed.get_embedder() is None
        assert embed.get_embedder() is None
    notices = [r.getMessage() for r in caplog.records if r.name == "gitmem.store.embed"]
    assert len(notices) == 1
    assert "embedder provider: 'telepathy' is not one of" in notices[0]
    with pytest.raises(EmbedderError, match="telepathy"):
        embed.load_embedder({"provider": "telepathy"})


def test_missing_default_package_degrades_with_one_notice(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from gitmem.store.embed import static

    monkeypatch.setattr(static, "PACKAGE", "gitmem_no_such_package")
    with caplog.at_level(logging.WARNING, logger="gitmem.store.embed"):
        assert embed.get_embedder() is None
        assert embed.get_embedder() is None
    notices = [r.getMessage() for r in caplog.records if r.name == "gitmem.store.embed"]
    assert len(notices) == 1 and "lexical only" in notices[0]
    assert install_command("embed") in notices[0]  # from where this gitmem was installed


def test_an_api_key_in_the_config_file_is_refused_without_echoing_it() -> None:
    with pytest.raises(EmbedderError) as info:
        HttpEmbedder({"provider": "openai", "model": "m", "api_key": "sk-secret-123"})
    assert "api_key_env" in str(info.value) and "sk-secret-123" not in str(info.value)


def test_local_providers_fail_clearly_when_their_library_is_missing() -> None:
    for provider in ("sentence-transformers", "fastembed"):
        try:
            __import__(provider.replace("-", "_"))
        except ImportError:
            with pytest.raises(EmbedderError, match=f"needs the {provider}"):
                embed.load_embedder({"provider": provider, "model": "/no/such/model"})


# -- the HTTP providers, against a local server -------------------------------------------


def _vector(text: str, dim: int) -> list[float]:
    digest = hashlib.sha256(text.encode()).digest()
    return [float(digest[i % len(digest)]) - 127.5 for i in range(dim)]


class _Server:
    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str], Any]] = []
        self.dim = 8
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length))
                owner.requests.append((self.path, dict(self.headers), body))
                texts = body.get("input", [])
                if self.path == "/slow/v1/embeddings":
                    time.sleep(1.5)
                if self.path == "/fail/v1/embeddings":
                    self._send(500, b'{"error": "model exploded"}')
                elif self.path == "/redirect/v1/embeddings":
                    self.send_response(307)
                    self.send_header("Location", "http://127.0.0.1:9/elsewhere")
                    self.end_headers()
                elif self.path == "/html/v1/embeddings":
                    self._send(200, b"<html>not json</html>")
                elif self.path == "/short/v1/embeddings":
                    self._json({"data": [{"index": 0, "embedding": _vector("x", owner.dim)}]})
                elif self.path == "/nan/v1/embeddings":
                    row = [float("nan")] + [1.0] * (owner.dim - 1)
                    self._json({"data": [{"index": i, "embedding": row} for i in range(2)]})
                elif self.path == "/api/embed":
                    self._json({"embeddings": [_vector(t, owner.dim) for t in texts]})
                else:
                    # OpenAI-compatible, answered in reverse order: the client sorts by index.
                    items = [
                        {"index": i, "embedding": _vector(t, owner.dim)}
                        for i, t in enumerate(texts)
                    ]
                    self._json({"data": items[::-1], "model": body.get("model")})

            def _json(self, data: Any) -> None:
                self._send(200, json.dumps(data).encode())

            def _send(self, code: int, payload: bytes) -> None:
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        class Server(ThreadingHTTPServer):
            def handle_error(self, request: Any, client_address: Any) -> None:
                pass  # a client that timed out closed its end: nothing to report

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def url(self, prefix: str = "") -> str:
        return f"http://127.0.0.1:{self.port}{prefix}/v1/embeddings"


def _openai(url: str, **options: Any) -> HttpEmbedder:
    return HttpEmbedder({"provider": "openai", "url": url, "model": "m", **options})


@pytest.fixture
def server() -> Iterator[_Server]:
    s = _Server()
    yield s
    s.httpd.shutdown()
    s.httpd.server_close()


def test_openai_compatible_endpoint(server: _Server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_EMBED_KEY", "sk-test-key-42")
    e = embed.load_embedder(
        {"provider": "openai", "url": server.url(), "model": "tiny",
         "api_key_env": "TEST_EMBED_KEY", "batch": 2}
    )
    assert e is not None and e.dim == 8 and e.name == "openai:tiny"
    texts = ["alpha", "beta", "gamma"]
    vectors = e.embed(texts)
    expected = np.asarray([_vector(t, 8) for t in texts])
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    assert np.allclose(vectors, expected, atol=1e-6)  # in input order, normalised
    _, headers, body = server.requests[-1]
    assert headers["Authorization"] == "Bearer sk-test-key-42"
    assert body == {"model": "tiny", "input": ["gamma"]}  # batches of 2: the last one
    assert len(server.requests) == 1 + 2  # the dimension probe, then two batches


def test_ollama_endpoint(server: _Server) -> None:
    e = embed.load_embedder(
        {"provider": "ollama", "url": f"http://127.0.0.1:{server.port}", "model": "nomic",
         "dim": 8}
    )
    assert e is not None and e.name == "ollama:nomic:8"
    vectors = e.embed(["one", "two"])
    assert vectors.shape == (2, 8)
    assert server.requests[-1][0] == "/api/embed"
    assert server.requests[-1][2] == {"model": "nomic", "input": ["one", "two"]}


@pytest.mark.parametrize(
    ("prefix", "message"),
    [
        ("/fail", "answered HTTP 500: {\"error\": \"model exploded\"}"),
        ("/redirect", "answered HTTP 307"),
        ("/html", "did not answer with JSON"),
        ("/short", "returned 1 vectors for 2 texts"),
        ("/nan", "returned a vector with NaN or infinity"),
    ],
)
def test_endpoint_errors_are_one_line_embedder_errors(
    server: _Server, prefix: str, message: str
) -> None:
    e = _openai(server.url(prefix), dim=8)  # dim given: no probe at load
    with pytest.raises(EmbedderError, match=message) as info:
        e.embed(["a", "b"])
    assert "\n" not in str(info.value)


def test_endpoint_timeout(server: _Server) -> None:
    e = _openai(server.url("/slow"), dim=8, timeout=0.3)
    started = time.monotonic()
    with pytest.raises(EmbedderError, match=r"did not answer within 0.3 s"):
        e.embed(["a"])
    assert time.monotonic() - started < 1.4


def test_wrong_dimension_is_refused(server: _Server) -> None:
    e = _openai(server.url(), dim=8)
    server.dim = 12  # the model behind the endpoint changed
    with pytest.raises(EmbedderError, match="returned 12-d vectors where 8-d were expected"):
        e.embed(["a"])


def test_unreachable_endpoint_and_credentials_kept_out_of_messages() -> None:
    e_url = "http://user:hunter2@127.0.0.1:9/v1/embeddings?key=abc"
    assert redact(e_url) == "http://127.0.0.1:9/v1/embeddings"
    with pytest.raises(EmbedderError) as info:
        _openai(e_url, dim=4, timeout=2).embed(["a"])
    text = str(info.value)
    assert "unreachable" in text and "hunter2" not in text and "key=abc" not in text
    with pytest.raises(EmbedderError, match="not an http"):
        _openai("file:///etc/passwd", dim=4)


def test_unreachable_configured_endpoint_degrades_to_lexical(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _write_config(
        tmp_path,
        "embedder: {provider: ollama, url: 'http://127.0.0.1:9', model: m, timeout: 2}\n",
    )
    with caplog.at_level(logging.WARNING, logger="gitmem.store.embed"):
        assert embed.get_embedder() is None
    assert any("unreachable" in r.getMessage() for r in caplog.records)


# -- local providers, through stand-in packages on sys.path ------------------------------------
# The real libraries need torch or onnxruntime and a model on disk, which this suite does not
# install; these stand-ins record what gitmem asks of them, so the glue (offline flags,
# shapes, normalisation, errors) is checked against the libraries' documented calls.

_SENTENCE_TRANSFORMERS = '''
import os
import numpy as np
seen = {}
class SentenceTransformer:
    def __init__(self, model, **kwargs):
        seen["model"], seen["kwargs"] = model, kwargs
        seen["offline"] = os.environ.get("HF_HUB_OFFLINE")
        if model == "missing":
            raise OSError("no such model on disk and downloads are off")
    def get_sentence_embedding_dimension(self):
        return 3
    def encode(self, texts, batch_size, convert_to_numpy, normalize_embeddings,
               show_progress_bar):
        seen["batch_size"] = batch_size
        return np.array([[len(t), 1.0, 0.0] for t in texts], dtype=np.float32)
'''

_FASTEMBED = '''
import numpy as np
seen = {}
class TextEmbedding:
    def __init__(self, model_name, **kwargs):
        seen["model"], seen["kwargs"] = model_name, kwargs
    def embed(self, texts, batch_size=256):
        for t in texts:
            yield np.array([3.0, 4.0], dtype=np.float32) * (1 + len(t))
'''


@pytest.fixture
def stand_ins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    (tmp_path / "sentence_transformers.py").write_text(_SENTENCE_TRANSFORMERS)
    (tmp_path / "fastembed.py").write_text(_FASTEMBED)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        # set, then delete: monkeypatch then restores the original state, so the provider's
        # os.environ.setdefault does not leak into later tests
        monkeypatch.setenv(name, "0")
        monkeypatch.delenv(name)
    for module in ("sentence_transformers", "fastembed"):
        sys.modules.pop(module, None)
    yield tmp_path
    for module in ("sentence_transformers", "fastembed"):
        sys.modules.pop(module, None)


def test_sentence_transformers_provider_stays_offline(stand_ins: Path) -> None:
    e = embed.load_embedder({"provider": "sentence-transformers", "model": "/models/mini",
                             "batch": 8})
    assert e is not None and e.name == "sentence-transformers:/models/mini" and e.dim == 3
    import sentence_transformers

    seen = sentence_transformers.seen  # type: ignore[attr-defined]
    assert seen["kwargs"] == {"device": "cpu", "local_files_only": True}
    assert seen["offline"] == "1"  # set before the library was imported
    vectors = e.embed(["ab", "abcd"])
    assert vectors.shape == (2, 3) and seen["batch_size"] == 8
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    with pytest.raises(EmbedderError, match="cannot load sentence-transformers model 'missing'"):
        embed.load_embedder({"provider": "sentence-transformers", "model": "missing"})


def test_fastembed_provider_stays_offline_unless_allowed(stand_ins: Path) -> None:
    e = embed.load_embedder({"provider": "fastembed", "model": "BAAI/bge-small-en-v1.5",
                             "cache_dir": "/models"})
    assert e is not None and e.dim == 2
    import fastembed

    seen = fastembed.seen  # type: ignore[attr-defined]
    assert seen["kwargs"] == {"cache_dir": "/models", "local_files_only": True}
    assert np.allclose(e.embed(["x", "yy"]), [[0.6, 0.8], [0.6, 0.8]])
    embed.load_embedder({"provider": "fastembed", "model": "m", "allow_download": True})
    assert "local_files_only" not in seen["kwargs"]
    with pytest.raises(EmbedderError, match="allow_download"):
        embed.load_embedder({"provider": "fastembed", "model": "m", "allow_download": "yes"})
    with pytest.raises(EmbedderError, match="embedder model: required field is missing"):
        embed.load_embedder({"provider": "fastembed"})


def test_a_full_piece_cache_is_cleared_without_losing_the_batchs_pieces(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A batch whose new pieces overflow the cache clears it; the batch's pieces that were
    # cached before must be tokenized again, not looked up in the emptied cache.
    from gitmem.store.embed import static

    texts = ["deploy staging alpha", "deploy staging beta gamma delta epsilon"]
    expected = static.load_default().embed(texts)
    e = static.load_default()
    monkeypatch.setattr(static, "CACHE_PIECES", 5)
    e.embed(["deploy staging"])  # cached: "deploy", "staging"
    assert np.array_equal(e.embed(texts), expected)
    vectors = e.embed(["zeta eta theta iota kappa", *texts])
    assert np.array_equal(vectors[1:], expected)


def test_vectors_are_the_same_before_and_after_the_table_is_widened() -> None:
    # The table stays float16 (as shipped) for the first few texts and is widened to
    # float32 once a caller embeds more (WIDEN_AFTER): the vector of a text must
    # not depend on which, or a catch-up and a rebuild would store different vectors.
    from gitmem.store.embed import static

    texts = ["the deploy target is staging; production deploys need a tag",
             "Fixtures live in tests/conftest.py", "", "日本語 deploy 🙂", "x " * 3000]
    narrow = static.load_default()
    before = narrow.embed(texts)
    assert narrow._wide is None  # a few texts do not widen it
    narrow.embed(["filler"] * (static.WIDEN_AFTER + 1))
    assert narrow._wide is not None
    assert np.array_equal(narrow.embed(texts), before)
    wide = static.load_default()
    vectors = wide.embed(["filler"] * (static.WIDEN_AFTER + 1) + texts)
    assert np.array_equal(vectors[-len(texts):], before)


def test_the_package_version_comes_from_its_dist_info_folder(tmp_path: Path) -> None:
    import importlib.metadata

    from gitmem.store.embed import static

    folder = static.package_dir()
    assert folder is not None
    assert static.package_version(folder) == importlib.metadata.version(static.PACKAGE)
    site = tmp_path / "site"
    (site / "pkg").mkdir(parents=True)
    (site / "my_pkg-1.2.3.dist-info").mkdir()
    (site / "my_pkg_extra-9.dist-info").mkdir()
    assert static.package_version(site / "pkg", "my-pkg") == "1.2.3"
    (site / "my_pkg-1.2.4.dist-info").mkdir()  # two versions left side by side: ask metadata
    assert static.package_version(site / "pkg", "my-pkg") == "unknown"


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        # A provider that cannot load: its logged warning (with the reason) is the one line.
        ("embedder:\n  provider: fastembed\n  model: /no/such/model\n", "recall is lexical only"),
        # Turned off on purpose: nothing was logged, so recall's own notice is the one line.
        ("embedder: none\n", "note: embeddings are off or unavailable"),
    ],
)
def test_recall_prints_one_notice_when_embeddings_are_off(
    tmp_path: Path, config: str, expected: str
) -> None:
    import gitmem

    store = gitmem.init(tmp_path / "s.git", bare=True)
    store.create("The deploy target is staging", title="deploy")
    (tmp_path / "config.yaml").write_text(config)
    done = subprocess.run(
        [sys.executable, "-m", "gitmem", "--store", str(store.path), "recall", "deploy"],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "GITMEM_CONFIG": str(tmp_path / "config.yaml")},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "deploy" in done.stdout
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and expected in lines[0], done.stderr


def test_a_committed_gitmem_yaml_does_not_choose_the_embedder(tmp_path: Path) -> None:
    # Where memory text is sent is the user's choice alone: an `embedder` section in the
    # store's committed configuration (a teammate's push) is not read.
    import gitmem
    from gitmem.format.layout import CONFIG_FILE

    store = gitmem.init(tmp_path / "wt")
    config = store.path / CONFIG_FILE
    config.write_text(
        config.read_text() + "embedder:\n  provider: openai\n  url: http://203.0.113.9/v1\n"
    )
    git = ["git", "-C", str(store.path), "-c", "user.name=t", "-c", "user.email=t@t.invalid"]
    subprocess.run([*git, "commit", "-qam", "embedder in gitmem.yaml"], check=True)
    store = gitmem.open(tmp_path / "wt")
    store.create("The deploy target is staging", title="deploy")
    found = store.recall("how do we deploy?")
    assert found.semantic  # the offline default answered: the committed endpoint was not used
    assert found.ids


def test_embedder_options_are_checked_by_their_schema() -> None:
    for bad, field in (({"batch": 0}, "batch"), ({"timeout": "soon"}, "timeout"),
                       ({"dim": 10**6}, "dim"), ({"model": " "}, "model")):
        with pytest.raises(EmbedderError, match=f"embedder {field}:"):
            embed.load_embedder({"provider": "ollama", "model": "m", **bad})
