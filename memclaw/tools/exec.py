"""The owner's `exec` tool (off unless `agent.exec_enabled`): a shell command in the workspace with a timeout, an
output cap and a deny list for destructive commands, run inside a bubblewrap sandbox (`agent.exec_sandbox`).

The sandbox (`sandbox_argv`) gives the command new PID, mount, IPC, UTS and network namespaces. Its environment
holds only PATH, HOME and LANG. It gets a fresh /proc, /dev and /tmp, the system's programs read-only, and the
workspace read-write. memclaw's process, home, config file and environment, and the user's home, are
not in it; a config file or memclaw home inside the workspace is covered. Without bwrap, exec refuses in one line.
`exec_sandbox = "none"` runs the command as memclaw's user with only secret-named variables removed: it can read
memclaw's config and, through /proc, its environment."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import select
import shutil
import signal
import subprocess
import threading
from pathlib import Path
from typing import Any

from pydantic import Field

from memclaw.config import config_secrets
from memclaw.tools.base import Args, Tool, ToolContext, ToolFailure, cap
from memclaw.util.home import memclaw_home
from memclaw.util.redact import environment_without_secrets

log = logging.getLogger(__name__)

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
        info_r = info_w = -1
        if ctx.config.agent.exec_sandbox == "none":
            argv: list[str] | str = args.command
            env = environment_without_secrets(os.environ, config_secrets(ctx.config))
        else:
            bwrap = shutil.which("bwrap")
            if bwrap is None:
                raise ToolFailure(_refusal("bubblewrap (bwrap) is not installed", install=True))
            info_r, info_w = os.pipe()
            argv = sandbox_argv(
                args.command, root=ctx.root, network=ctx.config.agent.exec_network, bwrap=bwrap, info_fd=info_w
            )
            # bwrap's own environment is what the sandbox's PID 1 shows in /proc/1/environ: nothing of memclaw's
            env = dict(SANDBOX_ENV)
        timeout = ctx.config.agent.exec_timeout_s
        try:
            proc = subprocess.Popen(
                argv,
                shell=isinstance(argv, str),
                cwd=ctx.root,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                pass_fds=(info_w,) if info_w >= 0 else (),
            )
        finally:
            if info_w >= 0:
                os.close(info_w)
        try:
            # Read both pipes as they fill, keeping only a head and a tail of each: a command that prints gigabytes
            # (`yes`, `cat /dev/urandom | base64`) costs bounded memory until the timeout kills it.
            out, err = _BoundedReader(proc.stdout), _BoundedReader(proc.stderr)
            code: int | None = None
            try:
                code = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                # The shell is not reaped yet, so its group id cannot have been reused
                _kill_group(proc.pid)
                proc.wait()
            finally:
                # Interrupted: never leave the command running
                if code is None and proc.returncode is None:
                    _kill_group(proc.pid)
                    proc.wait()
            # A background child still holds a pipe: end it (its group
            if not (out.join(2.0) and err.join(2.0)):
                # Exists while that child lives, so the id is still ours)
                _kill_group(proc.pid)
            if info_r >= 0 and code is not None and code != 0 and not _sandbox_started(info_r):
                first = err.result().decode("utf-8", "replace").strip().splitlines()
                raise ToolFailure(_refusal(f"its sandbox could not start ({first[0] if first else 'bwrap failed'})"))
        finally:
            if info_r >= 0:
                os.close(info_r)
        text = _fmt_exec(out.result(), err.result(), code)
        text = cap(text, MAX_EXEC_OUTPUT)
        if code is None:
            text += f"\n[killed after the {timeout:g}s timeout]"
        return text


SANDBOX_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SANDBOX_ENV = {"PATH": SANDBOX_PATH, "HOME": "/tmp", "LANG": "C.UTF-8"}
"""The whole environment of a sandboxed command (and of bwrap itself)."""

ETC_ALLOWED = (
    "alternatives",
    "bash.bashrc",
    "ca-certificates",
    "ca-certificates.conf",
    "debian_version",
    "gai.conf",
    "group",
    "host.conf",
    "hosts",
    "inputrc",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "locale.alias",
    "localtime",
    "magic",
    "magic.mime",
    "mime.types",
    "nsswitch.conf",
    "os-release",
    "passwd",
    "profile",
    "protocols",
    "resolv.conf",
    "services",
    "ssl",
    "terminfo",
    "timezone",
)
"""What a sandboxed command sees of /etc: what programs need to start, name users, resolve hosts and check
certificates. Not /etc itself: it may hold secrets (shadow, ssh host keys, service credentials)."""

SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


def sandbox_argv(command: str, *, root: Path, network: bool, bwrap: str = "bwrap", info_fd: int = -1) -> list[str]:
    """The bwrap command line that runs `command` with `sh -c` in the workspace `root`, sandboxed (see the module
    docstring). The workspace keeps its real path, so paths the model saw in tool results still work."""
    ws = root.resolve()
    argv = [bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--clearenv"]
    if network:
        argv.append("--share-net")
    if info_fd >= 0:
        argv += ["--info-fd", str(info_fd)]
    for name, value in SANDBOX_ENV.items():
        argv += ["--setenv", name, value]
    for d in SYSTEM_DIRS:
        if os.path.islink(d):
            argv += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            argv += ["--ro-bind", d, d]
    for name in ETC_ALLOWED:
        argv += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    argv += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--bind", str(ws), str(ws)]
    for path in hidden_in_workspace(ws):
        argv += ["--tmpfs", str(path)] if path.is_dir() else ["--ro-bind", "/dev/null", str(path)]
    argv += ["--chdir", str(ws), "/bin/sh", "-c", command]
    return argv


HOME_PRIVATE = ("config.toml", "config.json", "chat_history")
"""memclaw's files in its home that hold secrets: the config, and what the owner typed in chats."""


def hidden_in_workspace(root: Path) -> list[Path]:
    """What of memclaw's own lies inside the workspace `root` and is covered in the sandbox: memclaw's home (when
    inside the workspace), and each private file of the home that is, or links to, a file in the workspace."""
    home = memclaw_home().resolve()
    ws = root.resolve()
    out = [home] if home != ws and home.is_relative_to(ws) and home.is_dir() else []
    for name in HOME_PRIVATE:
        real = (home / name).resolve()
        if real.is_file() and real.is_relative_to(ws) and not any(real.is_relative_to(h) for h in out):
            out.append(real)
    return out


def _refusal(why: str, *, install: bool = False) -> str:
    """exec's one line when its sandbox is missing or broken, naming the fix."""
    fix = "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap)" if install else "fix bubblewrap"
    line = (
        f'exec is refused: {why}; {fix}, or set agent.exec_sandbox = "none" (unsafe: commands can then read '
        "memclaw's config and environment)"
    )
    log.warning("%s", line)
    return line


def _sandbox_started(info_r: int) -> bool:
    """Did bwrap report its sandbox's PID on the info pipe (it does once the sandbox is set up)?"""
    # poll, not select: select() refuses a descriptor numbered 1024 or more, which a long-lived process reaches
    poller = select.poll()
    poller.register(info_r, select.POLLIN)
    return bool(poller.poll(2000)) and b"child-pid" in os.read(info_r, 4096)


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
