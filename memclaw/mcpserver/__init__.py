"""`memclaw mcp`: memclaw's memory served over the Model Context Protocol (the official `mcp` SDK, imported here
and nowhere else). `server` builds the tools and resources for one client; `http` serves them over streamable HTTP
on 127.0.0.1 behind a bearer token. Who the client is (the owner, or one outside sender) is decided by the CLI,
with the one rule of `--sender` (memclaw.cli.sender_opt), and handed in."""
