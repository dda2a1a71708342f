"""Secrets are never shown: every place that prints a URL, an error or a log line goes through this module.

- `redact_url` and `redact_text` turn URL credentials and every known secret value into `***`.
- Known secret values are the config's keys, headers and tokens, and environment variables whose names say secret.
- `RedactingFilter` passes every log record through `redact_text`; memclaw.runtime.setup_logging installs it.
- `environment_without_secrets` is the environment the `exec` tool gives a command, with no secret in it.
- `mask_secrets` also masks secrets recognisable by their shape or by what precedes them, for the archive.
- `mask_for_memory` applies `mask_secrets` to a fact or history entry about to be saved, with one warning line.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any

MASK = "***"
MIN_SECRET_CHARS = 4
"""A configured secret shorter than this is not searched for in text (it would mask ordinary words)."""
MIN_ENV_SECRET_CHARS = 8
"""A variable named like a secret holds one only from this length (TOKENIZERS_PARALLELISM=false does not)."""
SECRET_NAME_RE = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH)", re.I)
"""Environment variable names that may hold a secret."""

_URL_USERINFO_RE = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/?#\s'\"<>]*)@")
_QUERY_PARAM_RE = re.compile(r"(?P<lead>[?&;](?P<name>[A-Za-z0-9_.\-\[\]]{1,64})=)(?P<value>[^&;#\s'\"<>\\]+)")
SECRET_PARAM_WORDS = frozenset(
    {
        "key", "apikey", "token", "accesstoken", "secret", "password", "passwd", "pwd", "pass", "sig", "signature",
        "auth", "authorization", "credential", "credentials", "sessionid", "session",
    }
)  # fmt: skip
"""A URL query parameter carries a secret when one of its name's words (split at _ - . and case) is one of these:
`key`, `api_key`, `apiKey`, `access_token`, `client_secret`, `X-Amz-Signature`, `sig`."""
_known: set[str] = set()
_known_lock = threading.Lock()
log = logging.getLogger(__name__)


def redact_url(url: str) -> str:
    """`url` with its credentials replaced by ***, wherever one appears in the text: the userinfo before '@'
    (`http://u:p@h:1/x` -> `http://***@h:1/x`) and the values of query parameters named for a secret
    (`?api_key=abc&v=2` -> `?api_key=***&v=2`)."""
    url = _URL_USERINFO_RE.sub(lambda m: f"{m['scheme']}{MASK}@", url)
    return _QUERY_PARAM_RE.sub(lambda m: m["lead"] + MASK if _secret_param(m["name"]) else m[0], url)


def _secret_param(name: str) -> bool:
    """Is a query parameter of this name a credential (one of its words is in SECRET_PARAM_WORDS)?"""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name).lower()
    words = [w for w in re.split(r"[\s_.\-\[\]]+", spaced) if w]
    return "".join(words) in SECRET_PARAM_WORDS or any(w in SECRET_PARAM_WORDS for w in words)


def url_secrets(text: str) -> list[str]:
    """The credentials of the URLs in `text`: each userinfo's user and password, and each secret query value
    (percent-decoded as well as raw)."""
    from urllib.parse import unquote

    out: list[str] = []
    for m in _URL_USERINFO_RE.finditer(text):
        for part in m["userinfo"].split(":", 1):
            out += [part, unquote(part)]
    for m in _QUERY_PARAM_RE.finditer(text):
        if _secret_param(m["name"]):
            out += [m["value"], unquote(m["value"])]
    return [v for v in dict.fromkeys(out) if len(v) >= MIN_SECRET_CHARS]


def has_url_credentials(text: str) -> bool:
    """Does `text` hold a URL with credentials (`scheme://user[:password]@host`, or `?api_key=...`)?"""
    return any(m["userinfo"] for m in _URL_USERINFO_RE.finditer(text)) or any(
        _secret_param(m["name"]) for m in _QUERY_PARAM_RE.finditer(text)
    )


def secret_pieces(value: str) -> list[str]:
    """A secret and, for a header like `Bearer abc...`, its token alone."""
    out = [value]
    parts = value.split()
    if len(parts) > 1:
        out += [p for p in parts if len(p) >= MIN_ENV_SECRET_CHARS]
    return [v for v in out if len(v) >= MIN_SECRET_CHARS]


def remember_secrets(values: Iterable[str]) -> None:
    """Add values to the secrets every later `redact_text` masks (load_config remembers the config's)."""
    with _known_lock:
        _known.update(v for v in values if v and len(v) >= MIN_SECRET_CHARS)


def env_secrets(environ: Mapping[str, str] | None = None) -> list[str]:
    """Values of the environment's variables whose names say they hold a secret (from MIN_ENV_SECRET_CHARS)."""
    env = os.environ if environ is None else environ
    return [v for k, v in env.items() if SECRET_NAME_RE.search(k) and len(v.strip()) >= MIN_ENV_SECRET_CHARS]


def known_secrets(extra: Iterable[str] = ()) -> list[str]:
    """Every secret value memclaw knows now, longest first (so a secret holding another is masked whole)."""
    with _known_lock:
        vals = set(_known)
    vals.update(v for v in extra if v and len(v) >= MIN_SECRET_CHARS)
    vals.update(env_secrets())
    return sorted(vals, key=len, reverse=True)


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with URL credentials and every known secret (plus `secrets`) replaced by ***."""
    text = redact_url(text)
    for s in known_secrets(secrets):
        if s in text:
            text = text.replace(s, MASK)
    return text


def redact_data(data: Any, secrets: Iterable[str] = ()) -> Any:
    """JSON-like `data` with URL credentials and every known secret (plus `secrets`) in any string replaced by ***."""
    text = redact_url(json.dumps(data, ensure_ascii=False, default=str))
    for s in known_secrets(secrets):
        text = text.replace(json.dumps(s, ensure_ascii=False)[1:-1], MASK)
    return json.loads(text)


def environment_without_secrets(environ: Mapping[str, str], secrets: Iterable[str] = ()) -> dict[str, str]:
    """`environ` minus every variable that names a secret, holds a known secret (or `secrets`), or carries URL
    credentials, whatever its name (DATABASE_URL=postgres://u:pw@host, MEMCLAW_MEMORY__CHROMA_HEADERS=...)."""
    known = known_secrets(secrets)
    return {
        k: v
        for k, v in environ.items()
        if not SECRET_NAME_RE.search(k) and not has_url_credentials(v) and not any(s in v for s in known)
    }


class RedactingFilter(logging.Filter):
    """Masks URL credentials and known secrets in a record's message and traceback, for every handler it is on."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            msg = record.getMessage()
        # A broken format string: leave it to the handler's own error path
        except Exception:
            return True
        clean = redact_text(msg)
        if clean != msg:
            record.msg, record.args = clean, ()
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact_text(record.exc_text)
        return True


# ----- secrets by their shape ------------------------------------------------------------------------------
_SHAPES = [
    re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)", re.S),
    # OpenAI, Anthropic (sk-ant-...)
    re.compile(r"\b(?:sk|rk|pk)-(?:[A-Za-z0-9]+-){0,3}[A-Za-z0-9_-]{16,}"),
    # Stripe
    re.compile(r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}"),
    # GitHub tokens
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}"),
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{30,}"),
    # GitLab
    re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}"),
    # Hugging Face
    re.compile(r"\bhf_[A-Za-z0-9]{30,}"),
    # Slack
    re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
    # Google API keys
    re.compile(r"\bAIza[0-9A-Za-z_-]{35}"),
    # AWS access key ids
    re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16}\b"),
    # JSON web tokens
    re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
]
_TOKENISH = r"[A-Za-z0-9/+=._~-]{8,}"
_BEARER = re.compile(r"(?i)\b(?:bearer|basic)\s+(?P<v>" + _TOKENISH + ")")
# api_key = ..., aws_secret_access_key: ..., "the token is ..."
_KEYED = re.compile(r"(?i)\b[\w-]*(?:key|token|secret)s?\b[\"']?\s*(?:is|was|:|=|=>)\s*[\"'`]?(?P<v>" + _TOKENISH + ")")
# "my password is hunter2", "wifi password: 'x y z'", "PIN is 4711"
_PASSWORD = re.compile(
    r"(?i)\b(?:password|passwd|passcode|pwd|pin(?:\s+code)?|(?P<phrase>passphrase|pass\s+phrase))\b"
    r"(?:\s+(?:for|to|of|on|at)(?:\s+[^\s:=.,;!?]+){1,3}?)?\s*(?:is|was|:|=)\s*"
    r"(?P<v>\"[^\"\n]*\"|'[^'\n]*'|`[^`\n]*`|(?(phrase)[^.;!?\n]+|[^\s.,;!?]+(?:[.,;!?]?[^\s.,;!?]+)*))"
)
"""A password or PIN: the quoted value, else the one word after "is"/":" (a passphrase: the rest of its clause)."""


def _looks_secret(value: str) -> bool:
    """A value after "key"/"token"/"secret" that is a credential, not a word ("the secret is patience")."""
    has_digit = any(c.isdigit() for c in value)
    return (has_digit and any(c.isalpha() for c in value)) or len(value) >= 24


def mask_secrets(text: str) -> str:
    """`text` with every secret memclaw can recognise replaced by ***: those `redact_text` knows (URL credentials,
    configured keys, the environment's secrets), and those recognisable by their shape or by what names them."""
    text = redact_text(text)
    for rx in _SHAPES:
        text = rx.sub(MASK, text)

    def value(m: re.Match[str], *, check: bool) -> str:
        if check and not _looks_secret(m.group("v")):
            return m.group(0)
        return m.group(0)[: m.start("v") - m.start(0)] + MASK + m.group(0)[m.end("v") - m.start(0) :]

    text = _BEARER.sub(lambda m: value(m, check=True), text)
    text = _KEYED.sub(lambda m: value(m, check=True), text)
    return _PASSWORD.sub(lambda m: value(m, check=False), text)


def mask_for_memory(text: str, secrets: Iterable[str] = ()) -> str:
    """`mask_secrets(text)` (and `secrets` masked too) for a text about to be saved to memory (a fact, a history
    entry), with one warning line when it masked something: the text is saved masked, never refused."""
    out = mask_secrets(redact_text(text, secrets) if secrets else text)
    if out != text:
        n = max(1, out.count(MASK) - text.count(MASK))
        log.warning("masked %d secret%s before saving (%s)", n, "" if n == 1 else "s", MASK)
    return out
