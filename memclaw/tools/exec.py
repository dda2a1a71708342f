"""The owner's `exec` tool (when `agent.exec_enabled`): a shell command in the workspace with a timeout, an output
cap, an environment without secrets, and a deny list for destructive commands. A guard against accidents, not a
sandbox."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import threading
from typing import Any

from pydantic import Field

from memclaw.config import config_secrets
from memclaw.tools.base import Args, Tool, ToolContext, ToolFailure, cap
from memclaw.util.redact import environment_without_secrets

MAX_EXEC_OUTPUT = 10_000

DENY_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    (
        re.compile(
            r"\brm\s+(?:-\S+\s+)*-[a-zA-Z]*[rRf][a-zA-Z]*\s+(?:-\S+\s+)*(?:/\*?|~/?|\$HOME/?|\.\./?|\*|\.)(?:\s|;|&|\||$)"
        ),
        "recursive/forced rm of /, ~, .., . or *",
    ),
    (re.compile(r"\brm\s+(?:-\S+\s+)*--no-preserve-root\b"), "rm --no-preserve-root"),
    (
        re.compile(r"\b(?:mkfs(?:\.\w+)?|wipefs|fdisk|sfdisk|parted|diskpart)\b"),
        "formatting or partitioning disks",
    ),
    (re.compile(r"\bdd\b[^|;&]*\b(?:if|of)=/dev/"), "dd on a device"),
    (re.compile(r">\s*/dev/(?:sd|nvme|hd|vd|xvd|mmcblk|disk)"), "writing to a block device"),
    (
        re.compile(
            r"(?:^|[;&|(`]|\bsudo|\bexec)\s*(?:shutdown|reboot|poweroff|halt|init\s+[06])(?:\s|;|&|\||\)|$)"
            r"|\bsystemctl\s+(?:poweroff|reboot|halt)\b"
        ),
        "shutting down or rebooting the machine",
    ),
    (re.compile(r":\s*\(\s*\)\s*\{[^}]*:\s*\|\s*:[^}]*\}\s*;?\s*:"), "a fork bomb"),
    (re.compile(r"\bchmod\s+(?:-\S+\s+)*-[a-zA-Z]*R[a-zA-Z]*\s+\S+\s+/(?:\s|$)"), "recursive chmod of /"),
    (re.compile(r"\bchown\s+(?:-\S+\s+)*-[a-zA-Z]*R[a-zA-Z]*\s+\S+\s+/(?:\s|$)"), "recursive chown of /"),
]


def denied_reason(command: str) -> str | None:
    """Why `command` is refused by the deny list, or None."""
    for pat, why in DENY_PATTERNS:
        if pat.search(command):
            return why
    return None


class ExecArgs(Args):
    command: str = Field(description="Shell command, run in the workspace directory.", min_length=1)


class Exec(Tool):
    name = "exec"
    description = "Run a shell command in the workspace directory and return its output (with a timeout)."
    Args = ExecArgs

    def available(self, ctx: ToolContext) -> bool:
        return ctx.is_owner and ctx.config.agent.exec_enabled

    def run(self, args: ExecArgs, ctx: ToolContext) -> str:
        why = denied_reason(args.command)
        if why:
            raise ToolFailure(f"command refused by the safety deny list ({why})")
        env = environment_without_secrets(os.environ, config_secrets(ctx.config))
        timeout = ctx.config.agent.exec_timeout_s
        proc = subprocess.Popen(
            args.command,
            shell=True,
            cwd=ctx.root,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        # Read both pipes as they fill, keeping only a head and a tail of each: a command that prints gigabytes
        # (`yes`, `cat /dev/urandom | base64`) costs bounded memory until the timeout kills it.
        out, err = _BoundedReader(proc.stdout), _BoundedReader(proc.stderr)
        code: int | None = None
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc.pid)  # the shell is not reaped yet, so its group id cannot have been reused
            proc.wait()
        finally:
            if code is None and proc.returncode is None:  # interrupted: never leave the command running
                _kill_group(proc.pid)
                proc.wait()
        if not (out.join(2.0) and err.join(2.0)):  # a background child still holds a pipe: end it (its group
            _kill_group(proc.pid)  # exists while that child lives, so the id is still ours)
        text = _fmt_exec(out.result(), err.result(), code)
        text = cap(text, MAX_EXEC_OUTPUT)
        if code is None:
            text += f"\n[killed after the {timeout:g}s timeout]"
        return text


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


class _BoundedReader:
    """Drains a pipe in a thread, keeping the first and last `limit // 2` bytes and counting the rest."""

    def __init__(self, pipe: Any, limit: int = MAX_EXEC_OUTPUT) -> None:

        self.pipe = pipe
        self.half = max(1, limit // 2)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self.thread = threading.Thread(target=self._run, name="exec-output", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            while chunk := self.pipe.read1(65536) if hasattr(self.pipe, "read1") else self.pipe.read(65536):
                self.total += len(chunk)
                room = self.half - len(self.head)
                if room > 0:
                    self.head += chunk[:room]
                    chunk = chunk[room:]
                if chunk:
                    self.tail += chunk
                    if len(self.tail) > self.half:
                        del self.tail[: len(self.tail) - self.half]
        with contextlib.suppress(OSError):
            self.pipe.close()

    def join(self, timeout: float) -> bool:
        """Wait for the pipe's end of file; False if it is still open after `timeout` seconds."""
        self.thread.join(timeout)
        return not self.thread.is_alive()

    def result(self) -> bytes:
        self.thread.join(timeout=5)
        omitted = self.total - len(self.head) - len(self.tail)
        if omitted <= 0:
            return bytes(self.head + self.tail)
        return bytes(self.head) + f"\n[... {omitted} bytes omitted ...]\n".encode() + bytes(self.tail)


def _fmt_exec(out: bytes, err: bytes, code: int | None) -> str:
    parts = []
    if out:
        parts.append(out.decode("utf-8", "replace").rstrip())
    if err:
        parts.append("[stderr]\n" + err.decode("utf-8", "replace").rstrip())
    if code is not None:
        parts.append(f"[exit code {code}]")
    return "\n".join(parts) if parts else "(no output)"
