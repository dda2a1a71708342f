"""`memclaw mcp`: serve the workspace's memory to MCP clients (memclaw.mcpserver), over stdio or local HTTP."""

from __future__ import annotations

from pathlib import Path


def mcp_command(*, http: bool, port: int, sender: str | None, read_only: bool, workspace: Path | None) -> None:
    """Resolve who the client is (`--sender`, by the one rule of memclaw.cli.sender_opt), then serve until the
    client closes stdin (stdio) or until interrupted (HTTP)."""
    from memclaw.cli.common import err_console, load, memory_service
    from memclaw.cli.memory_cmds import unit_json
    from memclaw.cli.sender_opt import sender_scope_for
    from memclaw.mcpserver.http import TOKEN_ENV, bearer_token, serve_http
    from memclaw.mcpserver.server import Client, Memory, build_server
    from memclaw.util.richtext import line

    cfg, ws = load(workspace)
    who = sender_scope_for(cfg, sender)
    # Refused at once, not at the first tool call
    ws.check_scope(who.scope)
    token = bearer_token() if http else ""
    mem = memory_service(cfg, ws, embeds=cfg.recall.mode != "bm25")
    client = Client(sender=who.sender, is_owner=who.is_owner, scope=who.scope)
    server = build_server(memory=Memory(service=mem, config=cfg, workspace=ws, client=client, unit_json=unit_json),
                          read_only=read_only)  # fmt: skip
    mode = "read only" if read_only else "read and write"
    try:
        if not http:
            server.run("stdio")
            return

        def ready(url: str) -> None:
            note = f"memclaw mcp: serving scope {who.scope} ({mode}) at {url} (bearer token from {TOKEN_ENV})"
            err_console.print(line(note), soft_wrap=True)

        serve_http(server, port=port, token=token, ready=ready)
    finally:
        mem.close()
