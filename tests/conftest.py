"""Test-wide guards: offline switches, a network guard, and a temp MEMCLAW_HOME for every test."""

from __future__ import annotations

import ipaddress
import os
import signal
import socket

import pytest
from hypothesis import settings

# Offline switches, before any heavy import.
from memclaw.runtime import set_offline_env

# A suite started in the background (`pytest ... &` from a script) inherits SIGINT ignored, and every child it starts
# would too, so the Ctrl-C tests (a real SIGINT to `memclaw chat`, `memory reindex`) would wait for nothing. A handler
# is reset to the default at exec, where SIG_IGN is inherited: give the suite the usual handler.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

set_offline_env()

# Property tests draw the same examples on every run, so a run is never red by chance; a failure reproduces as is.
# `HYPOTHESIS_PROFILE=explore` draws new examples, for a search by hand.
settings.register_profile("ci", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

_real_getaddrinfo = socket.getaddrinfo
_real_connect = socket.socket.connect
_LOCAL_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback", ""}


def _is_local(host: object) -> bool:
    if host is None:
        return True
    if isinstance(host, bytes):
        host = host.decode()
    host = str(host)
    if host in _LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class OutsideNetworkError(RuntimeError):
    pass


def _guarded_getaddrinfo(host, *args, **kwargs):
    if not _is_local(host):
        raise OutsideNetworkError(f"test tried to look up outside host {host!r}: a hidden download?")
    return _real_getaddrinfo(host, *args, **kwargs)


def _guarded_connect(self, address):
    if self.family in (socket.AF_INET, socket.AF_INET6) and not _is_local(address[0]):
        raise OutsideNetworkError(f"test tried to connect to {address!r}: a hidden download?")
    return _real_connect(self, address)


socket.getaddrinfo = _guarded_getaddrinfo
socket.socket.connect = _guarded_connect


@pytest.fixture(autouse=True)
def memclaw_home(tmp_path, monkeypatch):
    """Every test gets its own MEMCLAW_HOME."""
    home = tmp_path / "memclaw-home"
    home.mkdir()
    monkeypatch.setenv("MEMCLAW_HOME", str(home))
    for key in list(os.environ):
        if key.startswith("MEMCLAW_") and key not in ("MEMCLAW_HOME", "MEMCLAW_TEST_CHROMA_URL"):
            monkeypatch.delenv(key, raising=False)
    return home


@pytest.fixture(autouse=True)
def known_secrets_per_test():
    """The process's known secret values (memclaw.util.redact) are a test's own: one test's token never masks
    another test's text, whatever the order the tests run in."""
    from memclaw.util import redact

    with redact._known_lock:
        saved = set(redact._known)
    yield
    with redact._known_lock:
        redact._known.clear()
        redact._known.update(saved)


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory):
    """One real Chroma server for the session (started on first use)."""
    from tests.chroma_server import ChromaServer

    server = ChromaServer(tmp_path_factory.mktemp("chroma-server")).start()
    yield server
    server.stop()


@pytest.fixture(params=["embedded", "server"])
def store_backend(request):
    """Run a test against the embedded Chroma and against a real Chroma server."""
    return request.param


@pytest.fixture(scope="session")
def embedder():
    """The real bundled model, loaded once per test session."""
    from memclaw.config import EmbeddingsConfig
    from memclaw.embedding.load import load_embedder

    return load_embedder(EmbeddingsConfig())
