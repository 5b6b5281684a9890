"""The redaction corpus: secret shapes that must lose their secret, and look-alikes that must stay as written.

Each shape is a realistic example, generated from a fixed seed (the same corpus every run), in the
context it is met in (prose, a header, a query, a ``.env`` line, JSON); ``secret`` is its characteristic
part, the text that must appear in no redacted output. Near-misses are the things a too eager filter
would take for secrets: ids, hashes, words that begin like a key prefix, URLs without credentials,
secret references (a ``${vault:NAME}`` names a secret, it is not one, and stays legible).
Used by tests/toolgate/test_redaction_corpus.py and bench/redaction_corpus.py.
"""

from __future__ import annotations

import base64
import json
import random
import string
from dataclasses import dataclass

_random = random.Random(16)
ALNUM = string.ascii_letters + string.digits
UPPER_DIGITS = string.ascii_uppercase + string.digits
B64URL = ALNUM + "-_"
B64 = ALNUM + "+/"
HEX = "0123456789abcdef"


def _run(alphabet: str, length: int) -> str:
    # mixed enough to look like a real key (at least one digit and one letter)
    while True:
        value = "".join(_random.choice(alphabet) for _ in range(length))
        if all(
            any(test(c) for c in value) for test in (str.isdigit, str.isalpha) if any(map(test, alphabet))
        ):
            return value


@dataclass(frozen=True)
class Shape:
    """``text`` holds a secret; ``secret`` (its characteristic part) must not survive redaction."""

    name: str
    text: str
    secret: str


@dataclass(frozen=True)
class NearMiss:
    """``text`` holds no secret and must come back from redaction exactly as written."""

    name: str
    text: str


def _key(name: str, prefix: str, body: str, template: str = "use {key} for the deploy") -> Shape:
    return Shape(name, template.format(key=prefix + body), body)


def _jwt() -> str:
    header = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').rstrip(b"=").decode()
    claims = base64.urlsafe_b64encode(b'{"sub":"1234567890","name":"Alice","iat":1516239022}')
    return f"{header}.{claims.rstrip(b'=').decode()}.{_run(B64URL, 43)}"


def _pem(label: str) -> tuple[str, str]:
    lines = [_run(B64, 64) for _ in range(4)]
    body = "\n".join(lines)
    return f"-----BEGIN {label}-----\n{body}\n-----END {label}-----", lines[1]


AWS_KEY_ID = _run(UPPER_DIGITS, 16)
AWS_SECRET = _run(B64, 40)
GITHUB_PAT = _run(ALNUM + "_", 82)
BEARER = _run(B64URL + ".", 40)
BASIC = base64.b64encode(b"deploy-bot:" + _run(ALNUM, 20).encode()).decode()
JWT = _jwt()
RSA_PEM, RSA_LINE = _pem("RSA PRIVATE KEY")
PKCS8_PEM, PKCS8_LINE = _pem("PRIVATE KEY")
OPENSSH_PEM, OPENSSH_LINE = _pem("OPENSSH PRIVATE KEY")
EC_PEM, EC_LINE = _pem("EC PRIVATE KEY")
URL_PASSWORD = _run(ALNUM, 14)
AZURE_KEY = base64.b64encode(_random.randbytes(64)).decode()
PLAIN_PASSWORD = "correct-Horse-battery-" + _run(ALNUM, 6)


SHAPES: tuple[Shape, ...] = (
    # vendor keys, bare in prose
    _key("aws-access-key-id", "AKIA", AWS_KEY_ID),
    _key("aws-temporary-key-id", "ASIA", _run(UPPER_DIGITS, 16)),
    _key("github-classic-pat", "ghp_", _run(ALNUM, 36)),
    _key("github-oauth-token", "gho_", _run(ALNUM, 36)),
    _key("github-user-to-server", "ghu_", _run(ALNUM, 36)),
    _key("github-server-to-server", "ghs_", _run(ALNUM, 36)),
    _key("github-refresh-token", "ghr_", _run(ALNUM, 36)),
    _key("github-fine-grained-pat", "github_pat_", GITHUB_PAT),
    _key("gitlab-pat", "glpat-", _run(B64URL, 20)),
    _key("gitlab-deploy-token", "gldt-", _run(B64URL, 20)),
    _key("slack-bot-token", "xoxb-", f"{_run('0123456789', 12)}-{_run('0123456789', 13)}-{_run(ALNUM, 24)}"),
    _key("slack-user-token", "xoxp-", f"{_run('0123456789', 12)}-{_run('0123456789', 13)}-{_run(HEX, 32)}"),
    _key("slack-app-token", "xapp-", f"1-A{_run(UPPER_DIGITS, 10)}-{_run('0123456789', 13)}-{_run(HEX, 64)}"),
    _key(
        "slack-webhook",
        "https://hooks.slack.com/services/",
        f"T{_run(UPPER_DIGITS, 8)}/B{_run(UPPER_DIGITS, 8)}/{_run(ALNUM, 24)}",
        "POST to {key}",
    ),
    _key("stripe-live-secret", "sk_live_", _run(ALNUM, 99)),
    _key("stripe-test-secret", "sk_test_", _run(ALNUM, 99)),
    _key("stripe-restricted", "rk_live_", _run(ALNUM, 99)),
    _key("stripe-webhook-secret", "whsec_", _run(ALNUM, 32)),
    _key("openai-legacy", "sk-", _run(ALNUM, 48)),
    _key("openai-project", "sk-proj-", _run(B64URL, 156)),
    _key("openai-service-account", "sk-svcacct-", _run(B64URL, 74)),
    _key("anthropic", "sk-ant-api03-", _run(B64URL, 93) + "AA"),
    _key("google-api-key", "AIza", _run(B64URL, 35)),
    _key("google-oauth-client-secret", "GOCSPX-", _run(B64URL, 28)),
    _key("google-oauth-access-token", "ya29.", _run(B64URL, 120)),
    _key("sendgrid", "SG.", f"{_run(B64URL, 22)}.{_run(B64URL, 43)}"),
    _key("npm", "npm_", _run(ALNUM, 36)),
    _key("pypi", "pypi-", "AgEIcHlwaS5vcmc" + _run(B64URL, 70)),
    _key("huggingface", "hf_", _run(ALNUM, 34)),
    _key("digitalocean", "dop_v1_", _run(HEX, 64)),
    _key("shopify", "shpat_", _run(HEX, 32)),
    _key("databricks", "dapi", _run(HEX, 32)),
    # the same keys where they are met: a JSON-escaped line, a header, an env file, a config map
    _key("openai-after-json-escape", "sk-", _run(ALNUM, 48), "first line\\n{key}"),
    _key(
        "github-in-git-remote",
        "ghp_",
        _run(ALNUM, 36),
        "git push https://x-access-token:{key}@github.com/o/r",
    ),
    _key("aws-in-env-file", "AKIA", _run(UPPER_DIGITS, 16), "AWS_ACCESS_KEY_ID={key}\nAWS_REGION=eu-west-1"),
    Shape("aws-secret-access-key-env", f"aws_secret_access_key = {AWS_SECRET}", AWS_SECRET),
    Shape(
        "aws-secret-access-key-json",
        json.dumps({"AccessKeyId": "AKIA" + AWS_KEY_ID, "SecretAccessKey": AWS_SECRET}),
        AWS_SECRET,
    ),
    # headers
    Shape("authorization-bearer", f"Authorization: Bearer {BEARER}", BEARER),
    Shape("bearer-in-prose", f"call it with bearer {BEARER} please", BEARER),
    Shape("authorization-basic", f"Authorization: Basic {BASIC}", BASIC),
    Shape("proxy-authorization-basic", f"Proxy-Authorization: Basic {BASIC}", BASIC),
    Shape("authorization-token-scheme", f"Authorization: token {_run(HEX, 40)}", ""),
    Shape("x-api-key-header", f"X-Api-Key: {_run(HEX, 32)}", ""),
    Shape("curl-header", f"curl -H 'Authorization: Bearer {BEARER}' https://api.example.com", BEARER),
    # JWTs
    Shape("jwt-bare", f"session {JWT} expired", JWT.split(".", 1)[1]),
    Shape("jwt-in-cookie-text", f"id_token={JWT}", JWT.split(".", 1)[1]),
    # private keys
    Shape("pem-rsa", RSA_PEM, RSA_LINE),
    Shape("pem-pkcs8", PKCS8_PEM, PKCS8_LINE),
    Shape("pem-openssh", OPENSSH_PEM, OPENSSH_LINE),
    Shape("pem-ec", EC_PEM, EC_LINE),
    Shape("pem-in-json-string", json.dumps({"private_key": PKCS8_PEM}), PKCS8_LINE),
    Shape("pem-json-escaped-under-another-key", json.dumps({"pem": RSA_PEM}), RSA_LINE),
    # URLs with credentials
    Shape("https-user-password", f"https://deploy:{URL_PASSWORD}@registry.example.com/v2/", URL_PASSWORD),
    Shape(
        "postgres-url",
        f"DATABASE_URL=postgres://app:{URL_PASSWORD}x@db.internal:5432/app",
        URL_PASSWORD + "x",
    ),
    Shape("redis-url-password-only", f"redis://:{URL_PASSWORD}y@cache:6379/0", URL_PASSWORD + "y"),
    Shape(
        "amqp-url-in-json",
        json.dumps({"broker": f"amqp://guest:{URL_PASSWORD}z@mq:5672//"}),
        URL_PASSWORD + "z",
    ),
    # connection strings
    Shape(
        "azure-storage-connection-string",
        f"DefaultEndpointsProtocol=https;AccountName=acme;AccountKey={AZURE_KEY};EndpointSuffix=core.windows.net",
        AZURE_KEY,
    ),
    Shape(
        "azure-service-bus-connection-string",
        f"Endpoint=sb://acme.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey={AZURE_KEY[:44]}",
        AZURE_KEY[:44],
    ),
    Shape(
        "azure-sas-signature",
        f"https://acme.blob.core.windows.net/c?sv=2022-11-02&sp=r&sig={AZURE_KEY[:43]}%3D",
        AZURE_KEY[:43],
    ),
    # credential names in query strings, forms, JSON, env files and code
    Shape(
        "password-in-query",
        f"https://api.example.com/login?user=al&password={PLAIN_PASSWORD}",
        PLAIN_PASSWORD,
    ),
    Shape("api-key-in-query", f"GET /v1/data?page=2&api_key={_run(HEX, 32)}", ""),
    Shape("access-token-in-form", f"grant_type=refresh&access_token={_run(ALNUM, 30)}", ""),
    Shape("client-secret-in-json", json.dumps({"client_id": "web", "client_secret": _run(ALNUM, 32)}), ""),
    Shape("password-in-json", json.dumps({"user": "alice", "password": PLAIN_PASSWORD}), PLAIN_PASSWORD),
    Shape("passwd-in-yaml", f"db:\n  passwd: {PLAIN_PASSWORD}", PLAIN_PASSWORD),
    Shape(
        "twilio-auth-token-env",
        f"TWILIO_ACCOUNT_SID=AC{_run(HEX, 32)}\nTWILIO_AUTH_TOKEN={_run(HEX, 32)}",
        "",
    ),
    Shape("django-secret-key", f"SECRET_KEY = 'django-insecure-{_run(ALNUM, 40)}'", ""),
    Shape("private-key-json-number", '{"signing_key": 12345678901234567890}', "12345678901234567890"),
    Shape("python-repr", f"{{'api_key': '{_run(ALNUM, 32)}'}}", ""),
    Shape("password-percent-encoded", f"q=password%3D{PLAIN_PASSWORD}", PLAIN_PASSWORD),
)


def _fill_secrets(shapes: tuple[Shape, ...]) -> tuple[Shape, ...]:
    """A shape written with ``secret=""`` has its secret after the last ``=``, ``: `` or quote-space."""
    filled = []
    for shape in shapes:
        secret = shape.secret
        if not secret:
            tail = shape.text.rstrip("'\"}")
            for separator in ("=", ": ", " ", "'"):
                tail = tail.rsplit(separator, 1)[-1]
            secret = tail.strip("'\"")
        filled.append(Shape(shape.name, shape.text, secret))
    return tuple(filled)


SHAPES = _fill_secrets(SHAPES)

NEAR_MISSES: tuple[NearMiss, ...] = (
    NearMiss("uuid", "request 9f1c2b7e-4d3a-4e8b-9c6d-2a1b3c4d5e6f failed"),
    NearMiss("git-sha-in-prose", "fixed in commit 3f2a9c81d0b4e5f60718293a4b5c6d7e8f901234 last week"),
    NearMiss("docker-digest", "image@sha256:" + "4c" * 32),
    NearMiss("sk-inside-a-word", "the task-management-system-refactor-of-2024 is done"),
    NearMiss("sk-short", "press sk-1 then sk-2 to skip"),
    NearMiss("risk-words", "risk-assessment-for-the-quarterly-review-meeting"),
    NearMiss("short-base64-of-text", "payload aGVsbG8gd29ybGQ= decoded fine"),
    NearMiss("email-address", "write to alice.smith@example.com about it"),
    NearMiss("url-without-credentials", "https://example.com/path/to/page?q=search&page=2#top"),
    NearMiss("url-with-port", "http://localhost:8080/api/v1/health"),
    NearMiss("url-with-at-in-path", "https://social.example/@alice/123456789"),
    NearMiss("ssh-git-remote", "git clone ssh://git@github.com/org/repo.git"),
    NearMiss("scp-git-remote", "git@github.com:org/repo.git"),
    NearMiss("bearer-in-a-sentence", "The bearer of this letter is a trusted courier."),
    NearMiss("bearer-tokens-in-prose", "Bearer tokens must be rotated every ninety days."),
    NearMiss("basic-in-prose", "Basic information about the account is shown here."),
    NearMiss("token-count-json", '{"token_count": 123456789, "max_tokens": 4096}'),
    NearMiss("api-key-id-json", '{"api_key_id": "key_0123456789abcdef", "api_key_name": "deploy bot"}'),
    NearMiss("primary-key", "primary_key=order_id_20240101"),
    NearMiss("publishable-stripe-key", "pk_live_51H8xYzAbCdEfGhIjKlMnOpQrStUvWxYz0123456789"),
    NearMiss("vault-reference", "use ${vault:payments.api-key} for the call"),
    NearMiss("vault-reference-under-credential-key", '{"api_key": "${vault:stripe.key}"}'),
    NearMiss("env-reference-in-header", "Authorization: Bearer ${env:DEPLOY_TOKEN}"),
    NearMiss("caller-token-reference", '{"token": "${caller:token}"}'),
    NearMiss("prefix-named-in-docs", "GitHub tokens start with ghp_ and Slack bot tokens with xoxb-."),
    NearMiss("akia-in-a-word", "the AKIAPOLIS suburb of AKIA"),
    NearMiss("eyj-mention", "base64 JSON starts with eyJ, e.g. eyJhbGciOi."),
    NearMiss(
        "pem-public-key",
        "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END PUBLIC KEY-----",
    ),
    NearMiss(
        "pem-certificate", "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUQ\n-----END CERTIFICATE-----"
    ),
    NearMiss("iso-timestamp-and-ip", "2026-12-02T00:26:44Z from 192.168.10.20:443"),
    NearMiss("version-and-semver", "released v1.2.3-rc.4+build.567 to staging"),
    NearMiss("password-policy-prose", "Your password must be at least twelve characters long."),
    NearMiss("short-password-value", "password=short"),
    NearMiss("monkey-key", "monkey=bananas-and-more-bananas"),
    NearMiss("tokens-plural", "tokens: many many many"),
)
