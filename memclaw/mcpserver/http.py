"""`memclaw mcp --http`: the MCP server over streamable HTTP, bound to 127.0.0.1 only, behind a bearer token.

The token comes from MEMCLAW_MCP_TOKEN and nowhere else: memclaw never generates, prints, logs or stores it, so a
client's configuration keeps working across restarts. A request without `Authorization: Bearer <token>`, or with
another token, is answered 401 before it reaches the MCP layer (compared in constant time).
See docs/decisions/0037-mcp-transports-and-token.md.
"""

from __future__ import annotations

import errno
import hmac
import json
import os
import socket
from collections.abc import Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any

from memclaw.errors import ConfigError, UsageError

if TYPE_CHECKING:
    from mcp.server import MCPServer

TOKEN_ENV = "MEMCLAW_MCP_TOKEN"
HOST = "127.0.0.1"
PATH = "/mcp"
DEFAULT_PORT = 8765
MIN_TOKEN_CHARS = 24

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def bearer_token(environ: MutableMapping[str, str] | None = None) -> str:
    """The token from MEMCLAW_MCP_TOKEN: ConfigError (exit 2) when unset, short or holding whitespace."""
    from memclaw.util.redact import remember_secrets

    token = (os.environ if environ is None else environ).get(TOKEN_ENV, "").strip()
    make = "python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"
    if not token:
        raise ConfigError(f"no bearer token for --http: set {TOKEN_ENV}, e.g. export {TOKEN_ENV}=$({make})")
    if len(token) < MIN_TOKEN_CHARS or any(c.isspace() for c in token):
        raise ConfigError(
            f"{TOKEN_ENV} must be at least {MIN_TOKEN_CHARS} characters without spaces; make one with {make}"
        )
    # Masked in any log line or error message that would quote it
    remember_secrets([token])
    return token


class BearerAuth:
    """ASGI middleware: HTTP requests pass only with `Authorization: Bearer <token>`; lifespan events pass."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.authorized(scope):
            await self.app(scope, receive, send)
            return
        body = json.dumps(
            {"error": "invalid_token", "error_description": f"send Authorization: Bearer <the {TOKEN_ENV} value>"}
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", b'Bearer realm="memclaw"'),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    def authorized(self, scope: Scope) -> bool:
        given = [v for k, v in scope.get("headers", []) if k.lower() == b"authorization"]
        return len(given) == 1 and hmac.compare_digest(given[0], self._expected)


def bind(port: int) -> socket.socket:
    """A listening socket on 127.0.0.1:`port` (0: any free port); a port in use is a UsageError naming --port."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((HOST, port))
    except OSError as e:
        sock.close()
        if e.errno == errno.EADDRINUSE:
            raise UsageError(f"port {port} on {HOST} is in use; pass --port N (0: any free port)") from None
        raise UsageError(f"cannot listen on {HOST}:{port}: {e.strerror}; pass another --port") from None
    sock.listen(64)
    sock.set_inheritable(False)
    return sock


def serve_http(server: MCPServer, *, port: int, token: str, ready: Callable[[str], None]) -> None:
    """Serve `server` at http://127.0.0.1:<port>/mcp until interrupted. `ready` gets the URL once the socket
    listens: a client that connects before the server has started waits in the socket's backlog."""
    import uvicorn

    sock = bind(port)
    try:
        url = f"http://{HOST}:{sock.getsockname()[1]}{PATH}"
        app = BearerAuth(server.streamable_http_app(streamable_http_path=PATH, host=HOST), token)
        http = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on"))
        ready(url)
        http.run(sockets=[sock])
    finally:
        sock.close()
