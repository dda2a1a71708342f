"""The workspace: one folder holding the assistant's bootstrap files, its Markdown memory, skills and sessions.

- AGENTS.md, SOUL.md, USER.md, TOOLS.md and IDENTITY.md are the bootstrap files, read into every prompt.
- The owner's facts and history are `memory/MEMORY.md` and `memory/HISTORY.md`.
- An outside sender's own memory is under `memory/people/<sender>/`. The folder name is the percent-encoded sender
  id (memclaw.markdown.units.scope_dirname), so an id like "../x" cannot leave the folder.
- The verbatim conversation is `memory/archive/YYYY-MM-DD.md`, one file per day, and likewise under a sender's
  folder (memclaw.markdown.archive).
- Skills are `skills/<name>/SKILL.md`, conversation logs are in `sessions/`, and the rebuildable index is in
  `.memclaw-index/` by default.

`MEMCLAW_HOME` (default ~/.memclaw) holds config.toml and, by default, the workspace (`workspace/`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from dataclasses import dataclass, field
from datetime import date
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from memclaw.errors import InvalidSenderError, MemoryFileError, WorkspaceError
from memclaw.markdown.units import OWNER_SCOPE, scope_dirname, scope_from_dirname, sender_scope
from memclaw.util.safepath import refusal, refuse_symlinks

if TYPE_CHECKING:
    from memclaw.config import Config

log = logging.getLogger(__name__)

BOOTSTRAP_FILES = ("AGENTS.md", "SOUL.md", "USER.md", "TOOLS.md", "IDENTITY.md")
WORKSPACE_TEMPLATE_FILES = (*BOOTSTRAP_FILES, "memory/MEMORY.md", "memory/HISTORY.md")
INDEX_DIRNAME = ".memclaw-index"
PEOPLE_DIR = "memory/people"
ARCHIVE_DIR = "archive"
DEMO_OUTSIDER = "discord:424242"
MODEL_SKILLS_FILE = "sessions/model-skills.txt"
"""The skills (folder names under skills/) the model's file tools wrote, one a line: never always-on (see
`model_written_skills`). In sessions/, which the file tools never write. The owner trusts one by removing its line."""


def model_written_skills(root: Path) -> frozenset[str]:
    """The skill folders of the workspace at `root` that the model's file tools wrote or edited."""
    from memclaw.util.safepath import read_regular

    try:
        text = read_regular(Path(root) / MODEL_SKILLS_FILE).decode("utf-8", "replace")
    except OSError:
        return frozenset()
    return frozenset(line.strip() for line in text.splitlines() if line.strip())


def note_model_skill(root: Path, name: str) -> None:
    """Record that the model's file tools wrote into skills/`name`/ (before the write: a failed note stops it)."""
    if name in model_written_skills(root):
        return
    from memclaw.util.files import file_lock, replace_atomically

    path = Path(root) / MODEL_SKILLS_FILE
    with file_lock(path.with_name(".model-skills.lock")):
        names = sorted(model_written_skills(root) | {name})
        replace_atomically(path, ("\n".join(names) + "\n").encode("utf-8"), mode=0o600)


_WORKSPACE_PLACEHOLDER = "@WORKSPACE@"


@dataclass
class Workspace:
    root: Path

    def __post_init__(self) -> None:
        self.root = Path(self.root).expanduser()

    # ----- memory ------------------------------------------------------------------------------------------
    @property
    def memory_root(self) -> Path:
        return self.root / "memory"

    @property
    def people_dir(self) -> Path:
        return self.root / PEOPLE_DIR

    def memory_dir(self, scope: str) -> Path:
        """The folder of a scope's MEMORY.md/HISTORY.md; never outside `memory/` (InvalidSenderError) and never
        through a symlink below it (MemoryFileError, see memclaw.util.safepath)."""
        if scope != OWNER_SCOPE:
            sender = scope.removeprefix("people/") if scope.startswith("people/") else None
            if sender is None or sender_scope(sender) != scope:
                raise InvalidSenderError(
                    f"invalid scope {scope!r}: expected 'owner' or 'people/<sender id>' with a printable sender id"
                )
        d = self.root / scope_dirname(scope)
        # `people/` or the scope folder as a link could reach another scope
        refuse_symlinks(d, self.memory_root)
        return d

    def memory_file(self, scope: str = OWNER_SCOPE) -> Path:
        """The scope's MEMORY.md; MemoryFileError if it, or a folder on its way below `memory/`, is a symlink."""
        path = self.memory_dir(scope) / "MEMORY.md"
        refuse_symlinks(path, self.memory_root)
        return path

    def history_file(self, scope: str = OWNER_SCOPE) -> Path:
        """The scope's HISTORY.md; MemoryFileError if it, or a folder on its way below `memory/`, is a symlink."""
        path = self.memory_dir(scope) / "HISTORY.md"
        refuse_symlinks(path, self.memory_root)
        return path

    def archive_dir(self, scope: str = OWNER_SCOPE) -> Path:
        """The scope's archive folder (`memory/archive/`, `memory/people/<sender>/archive/`): one Markdown file per
        day of verbatim conversation (memclaw.markdown.archive). Refused as `memory_file` is when it is a symlink."""
        d = self.memory_dir(scope) / ARCHIVE_DIR
        refuse_symlinks(d, self.memory_root)
        return d

    def archive_file(self, scope: str, day: date) -> Path:
        """The scope's archive file of `day` (`.../archive/2026-11-25.md`)."""
        path = self.archive_dir(scope) / f"{day.isoformat()}.md"
        refuse_symlinks(path, self.memory_root)
        return path

    def archive_files(self, scope: str = OWNER_SCOPE) -> list[Path]:
        """The scope's archive day files, oldest first. Only `YYYY-MM-DD.md` names are archive files; anything else
        in the folder is left alone. A symlink among them is refused (MemoryFileError), never followed."""
        d, found = self.archive_stats(scope)
        return [d / name for name, _st in found]

    def archive_stats(
        self, scope: str = OWNER_SCOPE, *, ordered: bool = True
    ) -> tuple[Path, list[tuple[str, os.stat_result]]]:
        """The scope's archive folder, and the name and lstat of each of `archive_files`, from one scan of it.

        Recall checks every day file for changes before each search, so a thousand days cost a thousand lstat calls
        and no path walk. The order is the folder's when not `ordered`."""
        from memclaw.markdown.files import day_files

        d = self.archive_dir(scope)
        try:
            return d, day_files(d, ordered=ordered)
        except OSError as e:
            raise WorkspaceError(f"cannot list {d}: {e.strerror}; fix its permissions") from e

    def check_scope(self, scope: str) -> None:
        """Refuse a scope unsafe to use before anything of it is read: invalid (InvalidSenderError), or a symlink."""
        self.memory_file(scope)
        self.history_file(scope)

    def check_all(self) -> None:
        """Refuse what any command would (onboard): a symlink for a scope's files, their locks, `people/`, archive."""
        from memclaw.markdown.files import lock_path

        for scope in self.scopes():
            for path in (self.memory_file(scope), self.history_file(scope)):
                refuse_symlinks(lock_path(path), self.memory_root)
            if self.archive_dir(scope).is_dir():
                self.archive_files(scope)

    def scopes(self) -> list[str]:
        """`owner` and every outside sender with a folder under memory/people/ (sorted). MemoryFileError if
        `people/` or a folder in it is a symlink (see memclaw.util.safepath): refused, never skipped in silence."""
        out = [OWNER_SCOPE]
        people = self.people_dir
        refuse_symlinks(people, self.memory_root)
        try:
            entries = sorted(people.iterdir()) if people.is_dir() else []
        except OSError as e:
            raise WorkspaceError(f"cannot list {people}: {e.strerror}; fix its permissions") from e
        for d in entries:
            if d.is_symlink():
                raise MemoryFileError(refusal(d))
            if not d.is_dir():
                continue
            scope = scope_from_dirname(d.name)
            try:
                canonical = scope_dirname(scope) == f"{PEOPLE_DIR}/{d.name}" and sender_scope(scope[7:]) == scope
            except InvalidSenderError:
                canonical = False
            if not canonical:
                log.warning("ignoring %s: not a memclaw sender folder (names are percent-encoded sender ids)", d)
                continue
            out.append(scope)
        return out

    # ----- other paths -------------------------------------------------------------------------------------
    @property
    def index_dir(self) -> Path:
        return self.root / INDEX_DIRNAME

    @property
    def skills_dir(self) -> Path:
        return self.root / "skills"

    @property
    def sessions_dir(self) -> Path:
        return self.root / "sessions"

    @property
    def user_file(self) -> Path:
        return self.root / "USER.md"

    def source_of(self, path: Path) -> str:
        """A workspace file's path relative to the root, with POSIX separators (a unit's `source`)."""
        path = Path(path)
        try:
            return path.relative_to(self.root).as_posix()
        except ValueError:
            pass
        try:
            return path.resolve().relative_to(self.root.resolve()).as_posix()
        except (ValueError, OSError) as e:
            raise WorkspaceError(f"{path} is not inside the workspace {self.root}") from e


# ----- finding the workspace -----------------------------------------------------------------------------
def resolve_workspace(cfg: Config, override: Path | None = None) -> Workspace:
    """The workspace to use: `override` (e.g. --workspace), else the config's `workspace`, else
    $MEMCLAW_HOME/workspace. Raises WorkspaceError if it is missing, not a workspace or unreadable."""
    from memclaw.config import memclaw_home

    raw = override or cfg.workspace or memclaw_home() / "workspace"
    root = Path(raw).expanduser()
    try:
        exists = root.exists()
        is_dir = root.is_dir()
        has_memory = (root / "memory").is_dir()
    except OSError as e:
        raise WorkspaceError(f"cannot read workspace {root}: {e.strerror or e}; fix the path or its permissions") from e
    if exists and not is_dir:
        raise WorkspaceError(f"{root} is a file, not a workspace folder; give the path of a workspace folder")
    if not exists or not has_memory:
        why = " (the folder has no memory/ inside)" if is_dir else ""
        raise WorkspaceError(f"no workspace at {root}{why}: {create_advice(root)}")
    if not os.access(root, os.R_OK | os.X_OK) or not os.access(root / "memory", os.R_OK | os.X_OK):
        raise WorkspaceError(f"cannot read workspace {root}: permission denied; fix its permissions")
    try:
        next(iter(os.scandir(root / "memory")), None)
    except OSError as e:
        raise WorkspaceError(f"cannot read workspace {root}: {e.strerror or e}; fix its permissions") from e
    return Workspace(root)


def onboard_command(root: Path) -> str:
    """The command that creates the workspace at `root`.

    Plain `memclaw onboard` is only for the default one: without -w it creates $MEMCLAW_HOME/workspace, whatever the
    config names. The demo's place, under $MEMCLAW_HOME or ~/.memclaw, gets `memclaw demo`, saying where the demo is
    when MEMCLAW_HOME moved it."""
    import shlex

    from memclaw.config import memclaw_home

    here = Path(os.path.abspath(root))
    home = Path(os.path.abspath(memclaw_home()))
    if here == home / "workspace":
        return "memclaw onboard"
    if here in (home / "demo", _default_home_demo()):
        return "memclaw demo"
    return f"memclaw onboard -w {shlex.quote(str(root))}"


def _default_home_demo() -> Path:
    return Path(os.path.abspath(Path.home() / ".memclaw" / "demo"))


def create_advice(root: Path) -> str:
    """`run <the command that creates root>`, and where the demo is when MEMCLAW_HOME moved it elsewhere."""
    from memclaw.config import memclaw_home

    advice = f"run `{onboard_command(root)}`"
    demo = Path(os.path.abspath(memclaw_home())) / "demo"
    if Path(os.path.abspath(root)) == _default_home_demo() != demo:
        advice += f" (MEMCLAW_HOME is set: the demo is {demo})"
    return advice


# ----- creating files ------------------------------------------------------------------------------------
def _template(*parts: str) -> str:
    return resources.files("memclaw").joinpath("templates", *parts).read_text("utf-8")


def _create_new(path: Path, text: str) -> bool:
    """Write `path` only if it does not exist (atomic: temp file + hard link). True if created."""
    if path.exists() or path.is_symlink():
        return False
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, 0o644)
            try:
                os.link(tmp, path)
            except FileExistsError:
                return False
            # no hard links here: fall back to exclusive create
            except OSError:
                try:
                    with open(path, "x", encoding="utf-8", newline="\n") as f:
                        f.write(text)
                except FileExistsError:
                    return False
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    except OSError as e:
        raise WorkspaceError(f"cannot create {path}: {e.strerror or e}; check the folder's permissions") from e
    return True


def _ensure_dir(path: Path, created: list[Path], kept: list[Path]) -> None:
    if path.is_dir():
        kept.append(path)
        return
    try:
        path.mkdir(parents=True)
    except FileExistsError as e:
        raise WorkspaceError(f"{path} exists but is not a folder: move it away and run `memclaw onboard`") from e
    except OSError as e:
        raise WorkspaceError(f"cannot create {path}: {e.strerror or e}; check the folder's permissions") from e
    created.append(path)


@dataclass
class OnboardReport:
    home: Path
    workspace: Path
    config: Path
    created: list[Path] = field(default_factory=list)
    kept: list[Path] = field(default_factory=list)


def config_template(workspace: Path | None = None) -> str:
    """The commented config.toml; every key is commented out (the defaults) except `workspace` if given."""
    import json

    text = _template("config.toml")
    if workspace is not None:
        line = f"workspace = {json.dumps(str(workspace))}"
    else:
        line = '# workspace = "~/memclaw-workspace"   # default: $MEMCLAW_HOME/workspace'
    return text.replace(_WORKSPACE_PLACEHOLDER, line)


def create_workspace_files(root: Path, created: list[Path] | None = None, kept: list[Path] | None = None) -> Workspace:
    """Create the workspace's template files and folders that are missing; never touch existing files. A symlink
    every command would refuse (a memory file, its lock, `people/`, the archive: Workspace.check_all, MemoryFileError)
    is refused before anything is created in the workspace: a workspace no command can use is not "ready"."""
    created = [] if created is None else created
    kept = [] if kept is None else kept
    root = Path(root).expanduser()
    if root.exists() and not root.is_dir():
        raise WorkspaceError(f"{root} exists but is not a folder: choose another --workspace")
    Workspace(root).check_all()
    _ensure_dir(root, created, kept)
    for rel in WORKSPACE_TEMPLATE_FILES:
        dest = root / rel
        text = _template("workspace", *rel.split("/"))
        (created if _create_new(dest, text) else kept).append(dest)
    _ensure_dir(root / "skills", created, kept)
    return Workspace(root)


def onboard(home: Path, workspace: Path | None = None) -> OnboardReport:
    """Create $MEMCLAW_HOME/config.toml and the workspace. Idempotent; never overwrites an existing file."""
    from memclaw.config import config_path

    home = Path(home).expanduser()
    ws_root = Path(workspace).expanduser().absolute() if workspace is not None else home / "workspace"
    report = OnboardReport(home=home, workspace=ws_root, config=home / "config.toml")
    _ensure_dir(home, report.created, report.kept)
    existing = config_path(home)
    if existing is not None:
        report.config = existing
        report.kept.append(existing)
    else:
        text = config_template(ws_root if workspace is not None else None)
        (report.created if _create_new(report.config, text) else report.kept).append(report.config)
    create_workspace_files(ws_root, report.created, report.kept)
    return report


# ----- the demo ------------------------------------------------------------------------------------------
def _has_units(path: Path, kind: str) -> bool:
    from memclaw.markdown.files import read_units

    return bool(read_units(path, scope=OWNER_SCOPE, kind=kind, source=path.name))


def _write_demo_file(path: Path, text: str, kind: str) -> None:
    """Write demo memory unless the file already holds memories (an onboarded, still empty file is replaced)."""
    from memclaw.markdown.files import atomic_write, locked

    if path.exists() and _has_units(path, kind):
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with locked(path):
        if path.exists() and _has_units(path, kind):
            return
        atomic_write(path, text.encode("utf-8"))


def build_demo_workspace(path: Path) -> Workspace:
    """A demo workspace at `path`: an invented owner (Nadia, ~35 facts, 12 dated history entries) and one outside
    sender (3 facts). Existing memories are never overwritten."""
    ws = create_workspace_files(Path(path))
    _write_demo_file(ws.memory_file(OWNER_SCOPE), _template("demo", "MEMORY.md"), "fact")
    _write_demo_file(ws.history_file(OWNER_SCOPE), _template("demo", "HISTORY.md"), "history")
    outsider = sender_scope(DEMO_OUTSIDER)
    _write_demo_file(ws.memory_file(outsider), _template("demo", "people", "outsider", "MEMORY.md"), "fact")
    return ws


def demo_queries() -> list[str]:
    """Example questions for the demo workspace."""
    return [q.strip() for q in _template("demo", "queries.txt").splitlines() if q.strip()]
