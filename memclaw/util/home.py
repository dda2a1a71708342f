"""Where memclaw keeps its files: `$MEMCLAW_HOME` (default ~/.memclaw) and the config file in it. Imports nothing
heavy, so a command can find them before pydantic is loaded (memclaw.cli.early)."""

from __future__ import annotations

import os
from pathlib import Path


def memclaw_home() -> Path:
    return Path(os.environ.get("MEMCLAW_HOME") or Path.home() / ".memclaw").expanduser()


def config_path(home: Path | None = None) -> Path | None:
    """The config file in use: config.toml, else config.json, else None."""
    home = home or memclaw_home()
    for name in ("config.toml", "config.json"):
        p = home / name
        if p.exists():
            return p
    return None
