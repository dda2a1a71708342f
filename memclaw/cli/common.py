"""What every command needs: config, workspace, memory service, consoles. Imported lazily by commands."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from memclaw.util.visible import visible

if TYPE_CHECKING:
    from memclaw.config import Config
    from memclaw.service.facade import MemoryService
    from memclaw.workspace import Workspace

# Markup and emoji codes off: whatever reaches these consoles is shown as written (see memclaw.util.richtext).
console = Console(markup=False, emoji=False, highlight=False)
err_console = Console(stderr=True, markup=False, emoji=False, highlight=False)


def load(workspace: Path | None = None) -> tuple[Config, Workspace]:
    from memclaw.config import load_config
    from memclaw.workspace import resolve_workspace

    cfg = load_config()
    return cfg, resolve_workspace(cfg, workspace)


def open_memory(workspace: Path | None = None, *, json_out: bool = False) -> MemoryService:
    cfg, ws = load(workspace)
    return memory_service(cfg, ws, progress=not json_out)


def memory_service(cfg: Config, ws: Workspace, *, progress: bool = True, embeds: bool = False) -> MemoryService:
    """The workspace's memory, showing long index work on stderr unless `progress` is off (--json).

    `embeds`: the command is about to embed a query. Then the embedding model starts loading now, in the
    background, beside the rest of its start-up (memclaw.embedding.load.load_in_background)."""
    if embeds:
        from memclaw.embedding.load import load_in_background

        load_in_background(cfg.embeddings)
    from memclaw.service.facade import MemoryService
    from memclaw.util.progress import stderr_progress

    mem = MemoryService(ws, cfg)
    mem.on_interrupt = note_interrupt
    if progress:
        mem.progress = stderr_progress
    return mem


def auto_recall_embeds(cfg: Config) -> bool:
    """The context of a message recalls by vector too (auto-recall is on, in a mode that embeds the query)."""
    return cfg.context.recall_k > 0 and cfg.recall.mode != "bm25"


_interrupt_notes: list[str] = []


def note_interrupt(note: str) -> None:
    """What an interrupted command left, said by the console script as it exits 130 (typer turns a Ctrl-C into a
    plain exit code before the script sees it)."""
    _interrupt_notes.append(note)


def interrupt_note() -> str:
    return _interrupt_notes[-1] if _interrupt_notes else "Interrupted."


class _ConsoleLogHandler(logging.Handler):
    """Log records printed through a rich console, which draws them above a live spinner instead of into it.
    memclaw's own warnings are notes for the person (`warning: ...`), not log lines naming a logger."""

    def __init__(self, target: Console) -> None:
        super().__init__()
        self.target = target

    def emit(self, record: logging.LogRecord) -> None:
        from memclaw.util.richtext import warning

        try:
            if record.levelno == logging.WARNING and record.name.split(".")[0] == "memclaw":
                shown: Any = warning(record.getMessage())
            else:
                shown = visible(self.format(record))
            self.target.print(shown, markup=False, highlight=False, soft_wrap=True)
        except Exception:
            self.handleError(record)


@contextlib.contextmanager
def held_warnings(logger: str = "memclaw") -> Iterator[list[str]]:
    """Hold back the WARNING records of `logger` while a command runs, and hand their messages to it.

    So the command shows each warning once, with those it returns itself, not also as a log line."""
    held: list[str] = []

    def hold(record: logging.LogRecord) -> bool:
        if record.levelno == logging.WARNING and (record.name == logger or record.name.startswith(logger + ".")):
            held.append(record.getMessage())
            return False
        return True

    # the handlers that write to the terminal (basicConfig's, or log_through's), not e.g. a capture in tests
    handlers = [h for h in logging.getLogger().handlers if type(h) in (logging.StreamHandler, _ConsoleLogHandler)]
    for h in handlers:
        h.addFilter(hold)
    try:
        yield held
    finally:
        for h in handlers:
            h.removeFilter(hold)


def log_through(target: Console) -> None:
    """Route the root logger's stream handlers through `target` (for commands that show a spinner)."""
    root = logging.getLogger()
    for h in list(root.handlers):
        if type(h) is logging.StreamHandler:
            new = _ConsoleLogHandler(target)
            new.setFormatter(h.formatter)
            new.setLevel(h.level)
            # The redaction of secrets among them (memclaw.runtime.redact_logs)
            for f in h.filters:
                new.addFilter(f)
            root.removeHandler(h)
            root.addHandler(new)


def invoked_as() -> str:
    """How to run memclaw again, for hints: `memclaw` when PATH finds this very script, else the path that was run
    (e.g. .venv/bin/memclaw), or `python -m memclaw.cli.main` when it was run as a module."""
    import shutil

    arg0 = sys.argv[0] if sys.argv and sys.argv[0] else "memclaw"
    if arg0.endswith(".py"):
        return f"{sys.executable} -m memclaw.cli.main"
    if os.sep not in arg0:
        return arg0
    name = Path(arg0).name
    on_path = shutil.which(name)
    return name if on_path and os.path.realpath(on_path) == os.path.realpath(arg0) else arg0


def arg_or_stdin(value: str) -> str:
    """`-` means: read the text from stdin (e.g. `memclaw recall - < question.txt`); anything else is the text."""
    from memclaw.markdown.formats import clean_text

    if value != "-":
        # (undecodable argv bytes arrive as lone surrogates, which no file or terminal can take: U+FFFD)
        return clean_text(value)
    return sys.stdin.buffer.read().decode("utf-8", "replace").strip()


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


def tolerant_streams() -> None:
    """A character the terminal's encoding cannot show (LANG=C, an ASCII pipe) is written as an escape instead of
    failing the command: output comes after the work is done (`memory forget` has deleted by then)."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            with contextlib.suppress(ValueError, OSError):
                reconfigure(errors="backslashreplace")


def error_line(e: Exception) -> None:
    """`Error: <message>` on stderr, as written (a message may quote a user's text: its control characters are
    shown, never sent to the terminal), with URL credentials and known secrets masked (memclaw.util.redact)."""
    import typer

    from memclaw.util.redact import redact_text
    from memclaw.util.visible import visible

    typer.echo(f"Error: {visible(redact_text(str(e)))}", err=True)
