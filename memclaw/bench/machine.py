"""Where a benchmark ran and on what: this machine's cores, CPU, RAM, OS and Python, and a data file's sha256."""

from __future__ import annotations

import contextlib
import hashlib
import os
import platform
from pathlib import Path
from typing import Any


def machine_info() -> dict[str, Any]:
    """nproc, CPU model, RAM, OS and Python of this machine."""
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    ram_gib = None
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                ram_gib = round(int(line.split()[1]) / 1024 / 1024, 1)
                break
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "ram_gib": ram_gib,
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
    }


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def revision() -> str:
    """The checkout's commit (and whether memclaw/ has uncommitted changes), for the results files; "" outside git."""
    import subprocess

    def git(*args: str) -> str:
        try:
            done = subprocess.run(["git", *args], capture_output=True, text=True, cwd=Path(__file__).parent, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return ""
        return done.stdout.strip() if done.returncode == 0 else ""

    head = git("rev-parse", "--short", "HEAD")
    return head + (" (modified)" if head and git("status", "--porcelain", "--", "..") else "")
