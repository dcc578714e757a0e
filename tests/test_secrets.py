"""Credential detection (gitmem.format.secrets): realistic FAKE credentials, built at run time.

Every credential below is assembled by concatenation, so no scanner (ours in a
pre-commit hook, GitHub's push protection) flags this repository itself. None of
them is or was ever valid.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml
from storetools import commit_count, memory_text, plant, tip

import gitmem
from gitmem import Store
from gitmem.base.errors import InvalidInputError, InvalidMemoryError
from gitmem.base.redact import shannon_entropy
from gitmem.entry import hooks as gh
from gitmem.format.config import PolicyMapping, collecting_loosened
from gitmem.format.layout import memory_path
from gitmem.format.secrets import (
    ALLOW_MARKER,
    DEFAULT_PATTERNS,
    DEFAULT_POLICY,
    SecretFinding,
    SecretsFoundError,
    policy_from_config,
    refuse,
    scan_bytes,
    scan_text,
)

# -- fake credentials, one per built-in kind ------------------------------------------------

AWS_KEY_ID = "AKIA" + "Z7Q2LMNO3PXY4RST"
AWS_TEMP_KEY_ID = "ASIA" + "QX4MZ7RT2LPN6VWB"
AWS_SECRET = "wJalrXUtnF" + "EMI/K7MDENG/" + "bPxRfiCYzK8Q2LmN0p"
GITHUB_PAT = "ghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"
GITHUB_OAUTH = "gho_" + "Zz9Yy8Xx7Ww6Vv5Uu4Tt3Ss2Rr1Qq0Pp9Oo8"
GITHUB_APP = "ghs_" + "16C7e42F292c6912E7710c838347Ae178B4a"
GITHUB_FINE = "github_pat_" + "11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEF"
GITLAB = "glpat-" + "xY9z_8Wv7Ut6Sr5Qp4On"
SLACK_BOT = "xoxb-" + "123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
SLACK_HOOK = (
    "https://hooks.slack.com/services/" + "T0A1B2C3D/B4E5F6G7H/" + "x1Y2z3A4b5C6d7E8f9G0h1I2"
)
GOOGLE_API = "AIza" + "SyD4x9Qm2LkP7vN3bR8tW1cZ6yH5jF0gE2u"
ANTHROPIC = "sk-ant-api03-" + "Ab3Cd5Ef7Gh9Ij1Kl3Mn5Op7Qr9St1Uv3Wx5Yz7Ab9Cd1Ef3Gh5Ij7Kl9Mn1Op3Qr5"
OPENAI = "sk-proj-" + "Ab3Cd5Ef7Gh9Ij1Kl3Mn5Op7" + "T3Blbk" + "FJ" + "Qr9St1Uv3Wx5Yz7Ab9Cd1Ef3"
STRIPE = "sk_" + "live_" + "51Hx2Ab3Cd4Ef5Gh6Ij7Kl8Mn9Op"
OPENAI_PROJECT = "sk-proj-" + "Ab3Cd5Ef7Gh9Ij1Kl3Mn5Op7Qr9St1Uv3Wx5Yz7Ab9Cd1Ef3Gh5Ij7"
HUGGINGFACE = "hf_" + "kQzRbTnWmXpLvYcJhGfDsAeUiOoPlKjHgF"
NPM = "npm_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
PYPI = "pypi-" + "AgEIcHlwaS5vcmc" + "CJDk5ZjY4NzE2LTc3YzItNGQ1MS1hYjM3LTg2YjY5ZGRkNzRhZgACKlsz"
SENDGRID = "SG." + "a1B2c3D4e5F6g7H8i9J0kL" + "." + "m3N4o5P6q7R8s9T0u1V2w3X4y5Z6a7B8c9D0e1F2g3H"
JWT = (
    "eyJ"
    + "hbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9."
    + "eyJ"
    + "zdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkphbmUifQ."
    + "Sfl"
    + "KxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
DB_PASSWORD = "Xk9#mP2q" + "L7vR4tZ8"
PEM = (
    "-----BEGIN " + "RSA PRIVATE KEY-----\n"
    "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n"
    "-----END RSA PRIVATE KEY-----\n"
)
OPENSSH = "-----BEGIN " + "OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n"
GCP_JSON = (
    '{\n  "type": "service_account",\n  "project_id": "demo-123",\n'
    '  "private_key_id": "0123456789abcdef0123456789abcdef01234567",\n'
    '  "private_key": "-----BEGIN ' + "PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\\n"
    '-----END PRIVATE KEY-----\\n",\n  "client_email": "bot@demo-123.iam.gserviceaccount.com"\n}\n'
)

CASES: list[tuple[str, str, str]] = [
    ("aws-access-key-id", f"aws_access_key_id = {AWS_KEY_ID}", AWS_KEY_ID),
    ("aws-access-key-id", f"export AWS_ACCESS_KEY_ID={AWS_TEMP_KEY_ID}", AWS_TEMP_KEY_ID),
    ("aws-secret-access-key", f"aws_secret_access_key = {AWS_SECRET}", AWS_SECRET),
    ("aws-secret-access-key", f'"SecretAccessKey": "{AWS_SECRET}"', AWS_SECRET),
    ("github-token", f"use token {GITHUB_PAT} for the CI", GITHUB_PAT),
    ("github-token", f"GH_TOKEN={GITHUB_OAUTH}", GITHUB_OAUTH),
    ("github-token", f"installation token: {GITHUB_APP}", GITHUB_APP),
    ("github-fine-grained-token", f"the PAT is {GITHUB_FINE}", GITHUB_FINE),
    ("gitlab-token", f"CI_JOB: {GITLAB}", GITLAB),
    ("slack-token", f"bot = {SLACK_BOT}", SLACK_BOT),
    ("slack-webhook", f"post alerts to {SLACK_HOOK}", SLACK_HOOK.split("/services/")[1]),
    ("google-api-key", f"maps key {GOOGLE_API}", GOOGLE_API),
    ("anthropic-api-key", f"ANTHROPIC_API_KEY={ANTHROPIC}", ANTHROPIC),
    ("openai-api-key", f"OPENAI_API_KEY={OPENAI}", OPENAI),
    ("stripe-key", f"stripe {STRIPE}", STRIPE),
    ("openai-api-key", f"key: {OPENAI_PROJECT}", OPENAI_PROJECT),
    ("huggingface-token", f"HF_TOKEN={HUGGINGFACE}", HUGGINGFACE),
    ("huggingface-token", f"login with {HUGGINGFACE} then", HUGGINGFACE),
    ("npm-token", f"//registry.npmjs.org/:_authToken={NPM}", NPM),
    ("pypi-token", f"password = {PYPI}", PYPI),
    ("sendgrid-api-key", f"mail via {SENDGRID}", SENDGRID),
    ("jwt", f"cookie session={JWT}", JWT),
    ("secret-assignment", f"db_password = {DB_PASSWORD}", DB_PASSWORD),
    ("secret-assignment", f"dbPassword: '{DB_PASSWORD}'", DB_PASSWORD),
    ("secret-assignment", "GITHUB_TOKEN=" + "a1b2c3d4e5f6" * 3 + "abcd", "a1b2c3d4e5f6" * 3),
    ("url-credentials", f"postgres://admin:{DB_PASSWORD}@db.internal:5432/app", DB_PASSWORD),
    ("authorization-header", "Authorization: Bearer " + "abcDEF123456" + "ghiJKL789mno", "ghiJKL"),
]


@pytest.mark.parametrize(("kind", "text", "secret"), CASES, ids=[c[0] for c in CASES])
def test_each_kind_is_found_and_masked(kind: str, text: str, secret: str) -> None:
    body = f"# Notes\n\nsome context\n{text}\nmore text\n"
    findings = scan_text(body)
    assert [(f.kind, f.line) for f in findings] == [(kind, 4)]
    assert secret not in findings[0].excerpt
    assert "********" in findings[0].excerpt


def test_every_built_in_kind_has_a_case() -> None:
    tested = {c[0] for c in CASES} | {"private-key", "gcp-service-account-key"}
    assert tested == {p.kind for p in DEFAULT_PATTERNS}


def test_private_key_blocks_are_found_at_their_begin_line() -> None:
    text = "deploy key below\n" + PEM + "\nand\n" + OPENSSH
    findings = scan_text(text)
    assert [(f.kind, f.line) for f in findings] == [("private-key", 2), ("private-key", 7)]
    assert "MIIEow" not in findings[0].excerpt
    assert findings[0].excerpt.startswith("-----BEGIN " + "RSA PRIVATE KEY-----")


def test_a_gcp_service_account_file_is_one_finding_not_two() -> None:
    findings = scan_text(GCP_JSON)
    assert [(f.kind, f.line) for f in findings] == [("gcp-service-account-key", 5)]
    assert "MIIEvQ" not in findings[0].excerpt


@pytest.mark.parametrize(
    "text",
    [
        "password: hunter2",  # short: a human password, not a generated key
        "api_key: ${API_KEY}",
        "token: <your token here>",
        "AWS_SECRET_ACCESS_KEY=xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
        "password = your_password_123",
        "the deploy token is kept in vault under prod/deploy",
        "author: Jane Doe",
        "tokenizer_model: bert-base-uncased123",
        "max_tokens: 40961234567890",
        "commit 0123456789abcdef0123456789abcdef01234567 fixed it",
        "id: mem_0123456789abcdef0123456789abcdef",
        "session_id: 7c9e6679-7425-40de-944b-e07fc1f90ae7",
        "see https://example.com/docs/auth#tokens and http://localhost:8080/",
        "secret_sauce: butter",
        "token_url: https://auth.example.com/oauth2/token",
        "key: value",
        "token_file: ~/.config/tool/t0ken1234abcd",
        "private_key_id: 0f3c9a7b21e84d56a0b1c2d3e4f5a6b7c8d9e0f1",
        "password_hash: $2b$12$KIXQJ1n8b3ZWc5l8eP0Q2e",
        "The private key never leaves the HSM.",
        "",
    ],
)
def test_ordinary_text_is_not_reported(text: str) -> None:
    assert scan_text(text) == []


def test_findings_come_in_text_order_and_mask_every_secret_on_the_line() -> None:
    text = f"line one\nkeys {AWS_KEY_ID} and {GITHUB_PAT}\n{PEM}"
    findings = scan_text(text)
    assert [(f.kind, f.line) for f in findings] == [
        ("aws-access-key-id", 2),
        ("github-token", 2),
        ("private-key", 3),
    ]
    for finding in findings[:2]:
        assert AWS_KEY_ID not in finding.excerpt
        assert GITHUB_PAT not in finding.excerpt


def test_line_numbers_count_crlf_and_lone_lines() -> None:
    text = f"a\r\nb\r\n\r\ntoken {GITLAB}\r\n"
    assert [f.line for f in scan_text(text)] == [4]


def test_long_lines_are_cut_around_the_secret() -> None:
    text = "x " * 200 + GITHUB_PAT + " y" * 200
    (finding,) = scan_text(text)
    assert len(finding.excerpt) <= 90
    assert "ghp_********" in finding.excerpt


def test_control_characters_in_excerpts_are_replaced() -> None:
    (finding,) = scan_text(f"\x1b[31m {GITHUB_PAT}\x07")
    assert "\x1b" not in finding.excerpt and "\x07" not in finding.excerpt


def test_allow_marker_skips_a_line() -> None:
    text = f"example: {AWS_KEY_ID}  <!-- {ALLOW_MARKER} -->\nreal: {GITHUB_PAT}\n"
    assert [(f.kind, f.line) for f in scan_text(text)] == [("github-token", 2)]


def test_allow_list_drops_matching_secrets() -> None:
    text = f"{AWS_KEY_ID}\n{GITHUB_PAT}\n"
    assert [f.kind for f in scan_text(text, allow=[r"^AKIA"])] == ["github-token"]


def test_entropy() -> None:
    assert shannon_entropy("") == 0
    assert shannon_entropy("aaaa") == 0
    assert shannon_entropy("abcd") == 2
    assert shannon_entropy(DB_PASSWORD) > 3.5


def test_scan_bytes_survives_undecodable_content() -> None:
    data = b"\xff\xfe garbage\n" + GITHUB_PAT.encode()
    assert [(f.kind, f.line) for f in scan_bytes(data)] == [("github-token", 2)]


def test_the_error_names_kind_and_line_and_never_the_secret() -> None:
    text = f"a\nb\nkey {STRIPE}\n{GITHUB_PAT}\n"
    with pytest.raises(SecretsFoundError) as info:
        refuse(text, "body of mem_1")
    error = info.value
    assert isinstance(error, InvalidInputError)
    assert error.exit_code == 4
    assert str(error) == (
        "body of mem_1 looks like it holds a secret: stripe-key on line 3 (and 1 more)"
    )
    assert STRIPE not in str(error) and GITHUB_PAT[4:] not in str(error)
    assert "allow" in error.hint
    assert [f.kind for f in error.findings] == ["stripe-key", "github-token"]
    refuse("nothing to see", "body")  # no error


def test_findings_serialise() -> None:
    finding = SecretFinding("jwt", 3, "x eyJ********")
    assert finding.to_dict() == {"kind": "jwt", "line": 3, "excerpt": "x eyJ********"}


# -- the policy in gitmem.yaml ---------------------------------------------------------------


def test_no_section_means_the_built_in_patterns() -> None:
    policy = policy_from_config({"format": 1})
    assert policy.patterns == DEFAULT_PATTERNS
    assert policy.allow == ()
    assert policy_from_config(None).patterns == DEFAULT_PATTERNS


def test_config_adds_patterns_and_only_the_users_own_allow_and_disable() -> None:
    acme = "acme_" + "Q7w8E9r0T1y2U3i4O5p6A7s8D9f0G1h2"
    committed = {
        "secrets": {
            "patterns": [
                {"kind": "acme-token", "regex": r"acme_[A-Za-z0-9]{32}", "keep": 5},
                {"kind": "pin", "regex": r"PIN=(\d{6})", "group": 1, "min_entropy": 2.0},
            ],
            "allow": [r"^AKIA"],  # a store's file may not let a credential through
            "disable": ["jwt"],
        }
    }
    text = f"{acme}\n{AWS_KEY_ID}\n{JWT}\nPIN=918273\nPIN=111111\n"
    with collecting_loosened() as ignored:
        policy = policy_from_config(committed)
    assert [i.split(" ")[1] for i in ignored] == ["secrets.allow", "secrets.disable"]
    findings = policy.scan(text)
    assert [(f.kind, f.line) for f in findings] == [
        ("acme-token", 1), ("aws-access-key-id", 2), ("jwt", 3), ("pin", 4)
    ]
    assert findings[0].excerpt == "acme_********"
    assert "918273" not in findings[3].excerpt
    # The user's own settings for the store may.
    mine = PolicyMapping(
        {"secrets": {"patterns": committed["secrets"]["patterns"]}},
        {"secrets": {"allow": [r"^AKIA"], "disable": ["jwt"]}},
        "LOCAL",
    )
    policy = policy_from_config(mine)
    assert [(f.kind, f.line) for f in policy.scan(text)] == [("acme-token", 1), ("pin", 4)]
    assert "jwt" not in {p.kind for p in policy.patterns}


@pytest.mark.parametrize(
    ("section", "complaint"),
    [
        ([], "secrets: [] is not of type 'object'"),
        ({"patterns": "x"}, "secrets.patterns: 'x' is not of type 'array'"),
        ({"patterns": ["x"]}, "secrets.patterns.0: 'x' is not of type 'object'"),
        ({"patterns": [{"kind": "Bad Kind", "regex": "x"}]}, "secrets.patterns.0.kind: "),
        ({"patterns": [{"kind": "k", "regex": "("}]}, "secrets.patterns[0].regex is not a valid"),
        ({"patterns": [{"kind": "k"}]}, "secrets.patterns.0.regex: required field is missing"),
        ({"patterns": [{"kind": "k", "regex": "x", "group": 2}]}, "group 2 is not a group"),
        ({"patterns": [{"kind": "k", "regex": "x", "group": "n"}]}, "group 'n' is not a group"),
        ({"patterns": [{"kind": "k", "regex": "x", "keep": -1}]}, "patterns.0.keep: -1 is less"),
        ({"patterns": [{"kind": "k", "regex": "x", "min_entropy": "hi"}]}, "min_entropy: 'hi'"),
        ({"patterns": [{"kind": "k", "regex": "x", "flavour": 1}]}, "('flavour' was unexp"),
        ({"allow": "x"}, "secrets.allow: 'x' is not of type 'array'"),
        ({"ignore": []}, "secrets: Additional properties are not allowed ('ignore' was"),
    ],
)
def test_a_broken_policy_is_an_error_naming_the_key(section: object, complaint: str) -> None:
    with pytest.raises(InvalidMemoryError) as info:
        policy_from_config({"secrets": section})
    assert str(info.value).startswith("gitmem.yaml secrets") and complaint in str(info.value)
    # The same in the user's own settings, named by where they are.
    with pytest.raises(InvalidMemoryError) as info:
        policy_from_config(PolicyMapping({}, {"secrets": section}, "LOCAL"))
    assert str(info.value).startswith("LOCAL: secrets") and complaint in str(info.value)


@pytest.mark.parametrize(
    ("section", "complaint"),
    [
        ({"allow": ["["]}, "secrets.allow[0] is not a valid regular expression"),
        ({"disable": ["nope"]}, "secrets.disable names unknown kind(s) nope"),
    ],
)
def test_a_broken_local_allow_or_disable_is_an_error(section: object, complaint: str) -> None:
    with pytest.raises(InvalidMemoryError, match=re.escape("LOCAL: " + complaint)):
        policy_from_config(PolicyMapping({}, {"secrets": section}, "LOCAL"))
    with collecting_loosened() as ignored:  # committed, they are ignored, not read
        assert policy_from_config({"secrets": section}) == DEFAULT_POLICY
    assert len(ignored) == 1


# -- the store refuses to keep credentials ------------------------------------------------------


def _refused(call: object) -> SecretsFoundError:
    assert callable(call)
    with pytest.raises(SecretsFoundError) as info:
        call()
    return info.value


def test_create_with_a_credential_is_refused_and_nothing_is_written(any_store: Store) -> None:
    before, count = tip(any_store), commit_count(any_store)
    body = f"CI notes\n\nthe deploy uses {GITHUB_PAT}\n"
    error = _refused(lambda: any_store.create(body, title="ci"))
    assert "github-token on line" in str(error)
    assert GITHUB_PAT not in str(error) and GITHUB_PAT not in error.hint
    assert str(error).startswith("memories/")
    assert tip(any_store) == before and commit_count(any_store) == count
    assert any_store.list() == []


@pytest.mark.parametrize(
    "write",
    [
        lambda s, i: s.update(i, body=f"now: {AWS_KEY_ID}\n"),
        lambda s, i: s.update(i, title=f"key {SLACK_BOT}"),
        lambda s, i: s.append(i, PEM),
        lambda s, i: s.supersede(i, f"db_password = {DB_PASSWORD}\n"),
        lambda s, i: s.create("x", tags=[GITLAB]),
    ],
    ids=["update-body", "update-title", "append", "supersede", "tag"],
)
def test_every_write_path_is_guarded(store: Store, write: object) -> None:
    memory = store.create("harmless", title="t")
    before = tip(store)
    assert callable(write)
    _refused(lambda: write(store, memory.id))
    assert tip(store) == before
    assert store.read(memory.id).body == "harmless"
    assert not list((store.path / "memories").rglob(".*.tmp"))


def test_a_transaction_with_one_credential_commits_nothing(store: Store) -> None:
    before = tip(store)
    with pytest.raises(SecretsFoundError), store.transaction("two") as tx:
        tx.create("fine")
        tx.create(f"token {GITHUB_APP}")
    assert tip(store) == before


def test_an_explicit_allow_stores_it(store: Store) -> None:
    with store.secrets_allowed():
        memory = store.create(f"the documented test key is {AWS_KEY_ID}")
    assert AWS_KEY_ID in store.read(memory.id).body
    _refused(lambda: store.create(f"again {AWS_KEY_ID}"))  # the allowance ended with the block
    store.allow_secrets = True
    store.update(memory.id, body=f"rotated to {AWS_TEMP_KEY_ID}")
    assert AWS_TEMP_KEY_ID in store.read(memory.id).body


def test_the_allowance_is_per_thread(store: Store) -> None:
    import threading

    errors: list[BaseException] = []

    def other() -> None:
        try:
            store.create(f"from another thread {GITHUB_PAT}")
        except BaseException as exc:
            errors.append(exc)

    with store.secrets_allowed():
        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
    assert len(errors) == 1 and isinstance(errors[0], SecretsFoundError)


def _commit_config(store: Store, extra: str) -> None:
    config = store.db().snapshot().read("gitmem.yaml")
    assert config is not None
    plant(store, "gitmem.yaml", config.decode() + extra, "secrets policy")


def test_the_committed_policy_governs_writes(
    any_store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    acme = "acme_" + "Q7w8E9r0T1y2U3i4O5p6A7s8D9f0G1h2"
    any_store.create(f"before the policy {acme}")  # not a built-in kind
    _commit_config(
        any_store,
        "secrets:\n"
        "  patterns:\n"
        "    - kind: acme-token\n"
        "      regex: 'acme_[A-Za-z0-9]{32}'\n"
        "  allow: ['^AKIA']\n",
    )
    error = _refused(lambda: any_store.create(f"after {acme}"))
    assert "acme-token" in str(error)
    assert "aws-access-key-id" in str(_refused(lambda: any_store.create(f"key {AWS_KEY_ID}")))
    # The allow-list in the user's own configuration, for this store, lets it through.
    local = tmp_path / "mine.yaml"
    gitdir = str(any_store.db().gitdir.resolve())
    local.write_text(yaml.safe_dump({"stores": {gitdir: {"secrets": {"allow": ["^AKIA"]}}}}))
    monkeypatch.setenv("GITMEM_CONFIG", str(local))
    reopened = gitmem.open(any_store.path)
    reopened.create(f"an allowed key {AWS_KEY_ID}")


def test_each_committed_policy_governs_the_next_write(store: Store) -> None:
    # The policy is made once per committed gitmem.yaml and kept while that stays the tip's:
    # a change committed from elsewhere (another process, a pull) governs the next write.
    acme = "acme_" + "Q7w8E9r0T1y2U3i4O5p6A7s8D9f0G1h2"
    original = store.db().snapshot().read("gitmem.yaml")
    assert original is not None
    _commit_config(
        store,
        "secrets:\n  patterns:\n    - kind: acme-token\n      regex: 'acme_[A-Za-z0-9]{32}'\n",
    )
    assert "acme-token" in str(_refused(lambda: store.create(f"first {acme}")))
    backend = store._backend(None)
    made = backend.secret_policy
    store.create("a clean write under the same policy")
    assert backend.secret_policy is made  # not compiled again
    assert "acme-token" in str(_refused(lambda: store.create(f"again {acme}")))
    plant(store, "gitmem.yaml", original.decode(), "policy back to the built-in kinds")
    store.create(f"after the change {acme}")
    assert backend.secret_policy is not made


def test_a_broken_policy_is_reported_on_write(store: Store) -> None:
    _commit_config(store, "secrets:\n  patterns: [nope]\n")
    with pytest.raises(InvalidMemoryError, match=r"secrets\.patterns"):
        store.create("anything")


def test_the_allow_marker_works_through_the_store(store: Store) -> None:
    memory = store.create(f"example only: {AWS_KEY_ID} ({ALLOW_MARKER})\n")
    assert AWS_KEY_ID in store.read(memory.id).body


# -- the pre-commit hook ------------------------------------------------------------------------

HAND_ID = "mem_0a000000-0000-4000-8000-00000000000a"


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=False)


def _hand_write(store: Store, body: str) -> tuple[Path, str]:
    gh.install(store.path, "memory")
    path = memory_path(HAND_ID)
    (store.path / path).parent.mkdir(parents=True, exist_ok=True)
    (store.path / path).write_text(memory_text(HAND_ID, body))
    return store.path, path


def test_the_hook_refuses_a_staged_memory_with_a_credential(store: Store) -> None:
    root, path = _hand_write(store, f"note\nkey: {GITHUB_FINE}\n")
    assert _git(root, "add", "--", path).returncode == 0
    before = tip(store)
    result = _git(root, "commit", "-m", "hand edit")
    assert result.returncode != 0
    refused = [line for line in result.stderr.splitlines() if line.startswith("gitmem: refused:")]
    assert len(refused) == 1, result.stderr
    assert path in refused[0] and "github-fine-grained-token on line 8" in refused[0]
    assert GITHUB_FINE not in result.stderr + result.stdout
    assert tip(store) == before
    # The same file without the credential commits.
    (root / path).write_text(memory_text(HAND_ID, "note\nkey: kept in the vault\n"))
    assert _git(root, "add", "--", path).returncode == 0
    assert _git(root, "commit", "-m", "hand edit").returncode == 0, result.stderr


@pytest.mark.slow
def test_the_hook_uses_the_staged_policy_and_the_users_own(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    acme = "acme_" + "Q7w8E9r0T1y2U3i4O5p6A7s8D9f0G1h2"
    root, path = _hand_write(store, f"documented example {AWS_KEY_ID}\n")
    with (root / "gitmem.yaml").open("a") as fh:
        fh.write("secrets:\n  allow: ['^AKIA']\n")  # a store's file may not allow it
    assert _git(root, "add", "--", path, "gitmem.yaml").returncode == 0
    result = _git(root, "commit", "-m", "allowed example")
    assert result.returncode != 0 and "aws-access-key-id" in result.stderr
    assert "secrets.allow allows what looks like a credential: ignored" in result.stderr
    local = tmp_path / "mine.yaml"
    gitdir = str(store.db().gitdir.resolve())
    local.write_text(yaml.safe_dump({"stores": {gitdir: {"secrets": {"allow": ["^AKIA"]}}}}))
    monkeypatch.setenv("GITMEM_CONFIG", str(local))
    result = _git(root, "commit", "-m", "allowed example")
    assert result.returncode == 0, result.stderr
    # A pattern the staged gitmem.yaml adds is looked for.
    (root / path).write_text(memory_text(HAND_ID, f"a new kind {acme}\n"))
    with (root / "gitmem.yaml").open("a") as fh:
        fh.write("  patterns: [{kind: acme-token, regex: 'acme_[A-Za-z0-9]{32}'}]\n")
    assert _git(root, "add", "--", path, "gitmem.yaml").returncode == 0
    result = _git(root, "commit", "-m", "new kind")
    assert result.returncode != 0 and "acme-token" in result.stderr


PREFIXED = [c for c in CASES if c[0] in {
    "github-token", "github-fine-grained-token", "gitlab-token", "slack-token", "google-api-key",
    "anthropic-api-key", "openai-api-key", "stripe-key", "huggingface-token", "npm-token",
    "pypi-token", "sendgrid-api-key", "jwt",
}]


@pytest.mark.parametrize(("kind", "secret"), [(c[0], c[2]) for c in PREFIXED],
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(PREFIXED)])
@pytest.mark.parametrize("joint", ["_", "-"])
def test_a_prefixed_token_is_found_inside_a_snake_or_kebab_name(
    kind: str, secret: str, joint: str
) -> None:
    # Ids and entity names join words with _ or -: mem_ghp_... is still a GitHub token.
    (finding,) = scan_text(f"id: mem{joint}{secret}\n")
    assert finding.kind == kind
    assert secret not in finding.excerpt


@pytest.mark.parametrize("secret", [GITHUB_PAT, HUGGINGFACE, NPM, STRIPE])
def test_a_token_without_underscores_is_found_before_one(secret: str) -> None:
    (finding,) = scan_text(f"name: svc_{secret}_backup\n")
    assert secret not in finding.excerpt


def test_a_prefix_inside_a_word_is_not_a_token() -> None:
    # Bounded on the left by a letter or digit: the tail of a longer identifier is no token.
    assert scan_text("xghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5") == []
    assert scan_text("shf_" + "kQzRbTnWmXpLvYcJhGfDsAeUiOoPlKjHgF") == []
