"""The `memclaw` console script. Heavy libraries are imported inside commands, so `--help` stays fast.

Errors: every MemclawError becomes one line on stderr and its exit code, here and nowhere else.
Exit codes: 0 ok, 1 other, 2 usage/config/workspace, 3 memory files or index, 4 a service (Chroma, Discord) out
of reach, 5 LLM unavailable, 130 interrupted, 141 stdout closed by its reader (quietly).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from memclaw.cli.bench_app import bench_app
from memclaw.mcpserver.http import DEFAULT_PORT
from memclaw.runtime import set_offline_env, setup_logging

set_offline_env()


def _switches_as_switches() -> None:
    """typer's rich help shows a flag with a type (`--json <bool>`, `-v <int>`), as if it took a value, which it
    does not (`--json true` is an error). Its plain help leaves flags bare; make the rich help do the same."""
    option = getattr(typer.core, "TyperOption", None)
    shown = getattr(option, "display_type_rich", None)
    if shown is None or getattr(shown, "_memclaw", False):
        return

    def display_type_rich(self, ctx):  # noqa: ANN001, ANN202 - typer's signature
        return None if self.is_flag or self.count else shown(self, ctx)

    display_type_rich._memclaw = True  # type: ignore[attr-defined]
    option.display_type_rich = display_type_rich


_switches_as_switches()

app = typer.Typer(
    name="memclaw",
    help="A personal AI assistant with real long-term memory: Markdown memory, hybrid recall, sender-aware context.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)
memory_app = typer.Typer(help="Manage the Markdown memory and its derived index.", no_args_is_help=True)
app.add_typer(memory_app, name="memory")
app.add_typer(bench_app, name="bench")

WorkspaceOpt = Annotated[
    Path | None, typer.Option("--workspace", "-w", help="Workspace directory (default: from config).")
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable JSON on stdout.")]
SenderOpt = Annotated[
    str | None,
    typer.Option("--sender", help="Act for this outside sender (e.g. discord:1234); default: the owner."),
]


def _show_version(value: bool) -> None:
    if value:
        from memclaw import __version__

        typer.echo(f"memclaw {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    verbose: Annotated[int, typer.Option("--verbose", "-v", count=True, help="More logging (-vv for debug).")] = 0,
    version: Annotated[
        bool, typer.Option("--version", callback=_show_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    setup_logging(verbose)


@app.command()
def onboard(
    workspace: WorkspaceOpt = None,
    demo: Annotated[bool, typer.Option("--demo", help="Also fill the workspace with demo memories.")] = False,
) -> None:
    """Create the config and a workspace (idempotent: never overwrites a file you edited)."""
    from memclaw.cli import memory_cmds

    memory_cmds.onboard(demo=demo, workspace=workspace)


@app.command()
def demo(
    workspace: WorkspaceOpt = None,
    queries: Annotated[list[str] | None, typer.Argument(help="Queries to run (default: a few examples).")] = None,
) -> None:
    """Build a demo workspace with a few dozen memories, index it, and show `memclaw recall` on it."""
    from memclaw.cli import memory_cmds

    memory_cmds.demo(queries or [], workspace=workspace)


@app.command()
def recall(
    query: Annotated[str, typer.Argument(help="What to recall ('-': read it from stdin).")],
    k: Annotated[int | None, typer.Option("--k", "-k", min=1, max=200, help="How many memories.")] = None,
    sender: SenderOpt = None,
    mode: Annotated[str | None, typer.Option("--mode", help="hybrid | bm25 | vector")] = None,
    kind: Annotated[str | None, typer.Option("--kind", help="Only fact, history or archive.")] = None,
    tokens: Annotated[
        int | None,
        typer.Option(
            "--tokens",
            min=0,
            help="Show which hits a prompt memory section of this many tokens would hold, and why the rest are "
            "cut (as auto-recall fills context.memory_tokens; -k defaults to context.recall_k).",
        ),
    ] = None,
    json_out: JsonOpt = False,
    workspace: WorkspaceOpt = None,
) -> None:
    """Show exactly what memory retrieval returns for a query, and why (each signal's rank and score)."""
    from memclaw.cli import memory_cmds

    memory_cmds.recall(
        query, k=k, mode=mode, tokens=tokens, sender=sender, kind=kind, json_out=json_out, workspace=workspace
    )


@memory_app.command("sync")
def memory_sync(workspace: WorkspaceOpt = None, json_out: JsonOpt = False) -> None:
    """Index new, edited and deleted memories (incremental; also runs before recall)."""
    from memclaw.cli import memory_cmds

    memory_cmds.sync(json_out=json_out, workspace=workspace)


@memory_app.command("reindex")
def memory_reindex(workspace: WorkspaceOpt = None, json_out: JsonOpt = False) -> None:
    """Rebuild the whole index from the Markdown (progress on stderr; interrupted, the next command finishes it)."""
    from memclaw.cli import memory_cmds

    memory_cmds.reindex(json_out=json_out, workspace=workspace)


@memory_app.command("add")
def memory_add(
    text: Annotated[str, typer.Argument(help="The fact to remember.")],
    sender: SenderOpt = None,
    section: Annotated[
        str | None,
        typer.Option("--section", help='Heading path to file it under, e.g. "Work > Pets" (default: Notes).'),
    ] = None,
    learned: Annotated[
        str | None,
        typer.Option(
            "--date",
            metavar="YYYY-MM-DD",
            help="The day it was learned, marked at the end of the fact (default: today); relative dates in it "
            '("tomorrow") are read from that day.',
        ),
    ] = None,
    workspace: WorkspaceOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Append a fact to the right MEMORY.md, marked with the day it was learned, and index it."""
    from memclaw.cli import memory_cmds

    memory_cmds.add(text, section=section, learned=learned, sender=sender, json_out=json_out, workspace=workspace)


@memory_app.command("list")
def memory_list(
    sender: SenderOpt = None,
    kind: Annotated[
        str | None, typer.Option("--kind", help="Only fact, history or archive (one row per conversation).")
    ] = None,
    json_out: JsonOpt = False,
    workspace: WorkspaceOpt = None,
) -> None:
    """Every memory of the owner (or --sender's), with the id `memory forget` takes; the archive one row per
    conversation (its id, day, time, speakers, turns, first words)."""
    from memclaw.cli import memory_cmds

    memory_cmds.list_memories(sender=sender, kind=kind, json_out=json_out, workspace=workspace)


@memory_app.command("forget")
def memory_forget(
    ids: Annotated[
        list[str],
        typer.Argument(
            help="Ids from `memory list` or `recall --json`: facts, history entries, archived turns, whole "
            "conversations of the archive (c...), or a day of the archive (YYYY-MM-DD: that day's file)."
        ),
    ],
    sender: SenderOpt = None,
    json_out: JsonOpt = False,
    workspace: WorkspaceOpt = None,
) -> None:
    """Delete memories from the Markdown and the index; prints what was forgotten (a bad id: exit 2, nothing
    changes)."""
    from memclaw.cli import memory_cmds

    memory_cmds.forget(ids, sender=sender, json_out=json_out, workspace=workspace)


@memory_app.command("stats")
def memory_stats(workspace: WorkspaceOpt = None, json_out: JsonOpt = False) -> None:
    """Counts per scope and kind, index freshness and model."""
    from memclaw.cli import memory_cmds

    memory_cmds.stats(json_out=json_out, workspace=workspace)


@memory_app.command("migrate")
def memory_migrate(
    to: Annotated[str, typer.Option("--to", help="Chroma server URL, e.g. http://127.0.0.1:8000")],
    workspace: WorkspaceOpt = None,
) -> None:
    """Copy the embedded index to a Chroma server."""
    from memclaw.cli import memory_cmds

    memory_cmds.migrate(to, workspace=workspace)


@app.command()
def context(
    message: Annotated[str, typer.Argument(help="The message to build the prompt for ('-': read it from stdin).")],
    sender: SenderOpt = None,
    channel: Annotated[str, typer.Option("--channel", help="Channel the message comes from.")] = "cli",
    json_out: JsonOpt = False,
    workspace: WorkspaceOpt = None,
) -> None:
    """Show the assembled prompt and the token-budget table: why something was or was not in the prompt."""
    from memclaw.cli.context_cmd import context_command

    context_command(message, channel=channel, sender=sender, json_out=json_out, workspace=workspace)


@app.command()
def agent(
    message: Annotated[
        str, typer.Option("--message", "-m", help="One message ('-': read it from stdin); prints the reply.")
    ],
    workspace: WorkspaceOpt = None,
) -> None:
    """Send one message to the assistant (you are the owner) and print its reply."""
    from memclaw.cli.agent_cmd import agent_command

    agent_command(message, workspace=workspace)


@app.command()
def chat(workspace: WorkspaceOpt = None) -> None:
    """Talk to the assistant in the terminal (you are the owner)."""
    from memclaw.cli.agent_cmd import chat_command

    chat_command(workspace=workspace)


@app.command()
def gateway(workspace: WorkspaceOpt = None) -> None:
    """Run the Discord channel, the agent loop and the memory (token from MEMCLAW_DISCORD_TOKEN or config)."""
    from memclaw.cli.gateway_cmd import gateway_command

    gateway_command(workspace=workspace)


@app.command()
def mcp(
    http: Annotated[
        bool, typer.Option("--http", help="Serve streamable HTTP on 127.0.0.1 (token: MEMCLAW_MCP_TOKEN).")
    ] = False,
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="The --http port (0: any free port).")
    ] = DEFAULT_PORT,
    sender: SenderOpt = None,
    read_only: Annotated[bool, typer.Option("--read-only", help="Offer no remember or forget tool.")] = False,
    workspace: WorkspaceOpt = None,
) -> None:
    """Serve the memory to MCP clients (Claude Desktop, Claude Code, Cursor): recall, remember, list, forget, the
    memory section for a message, MEMORY.md and HISTORY.md. Over stdio by default; see docs/mcp.md."""
    from memclaw.cli.mcp_cmd import mcp_command

    mcp_command(http=http, port=port, sender=sender, read_only=read_only, workspace=workspace)


@app.command("import")
def import_(
    source: Annotated[str, typer.Argument(help="What to import: nanobot, openclaw, chatgpt or jsonl.")],
    path: Annotated[Path, typer.Argument(help="The workspace folder, export folder or file to import.")],
    consolidate: Annotated[
        bool, typer.Option("--consolidate", help="Also write facts and history with the model (cost shown first).")
    ] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what would be added; write nothing.")] = False,
    yes: Annotated[bool, typer.Option("--yes", help="Start --consolidate without asking.")] = False,
    workspace: WorkspaceOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Import conversations, facts and history from nanobot, OpenClaw, a ChatGPT export or JSONL (docs/import.md).

    Run again, it adds only what is missing (also after Ctrl-C). Exit codes: 2 a broken or unsafe source file
    (nothing written), 5 the model failed (--consolidate), 130 interrupted (run it again to go on)."""
    from memclaw.cli.import_cmd import import_command

    import_command(source, path, workspace, consolidate=consolidate, dry_run=dry_run, yes=yes, json_out=json_out)


@app.command("config")
def config_cmd(
    defaults: Annotated[
        bool, typer.Option("--defaults", help="Every key with its default (ignores the file and environment).")
    ] = False,
) -> None:
    """Print the effective configuration (file + environment) as JSON, secrets masked."""
    from memclaw.cli.common import print_json
    from memclaw.config import Config, dump_config, load_config

    print_json(dump_config(Config.model_construct() if defaults else load_config()))


@app.command()
def status(workspace: WorkspaceOpt = None, json_out: JsonOpt = False) -> None:
    """Config, model, workspace, memory counts per scope, index freshness, configured channels."""
    from memclaw.cli import memory_cmds

    memory_cmds.status(json_out=json_out, workspace=workspace)


def run() -> None:
    """Console-script entry point: the one place errors become messages and exit codes."""
    from memclaw.cli.common import error_line, tolerant_streams
    from memclaw.cli.exits import (
        OUTPUT_ERRNOS,
        closed_stdout,
        closed_streams_to_devnull,
        exit_for_unwritable_output,
        quiet_exit_for_closed_stdout,
        reader_gone,
    )
    from memclaw.errors import MemclawError

    tolerant_streams()
    closed_streams_to_devnull()
    try:
        # Click returns typer.Exit's code here instead of exiting
        code = app(standalone_mode=False)
        if reader_gone():
            quiet_exit_for_closed_stdout()
        # typer's word for a Ctrl-C: say what it left
        if code == 130:
            from memclaw.cli.common import interrupt_note

            typer.echo(interrupt_note(), err=True)
        # A reader that closed the pipe is met here, not in the interpreter's exit
        sys.stdout.flush()
        if isinstance(code, int) and code:
            sys.exit(code)
    except BrokenPipeError:
        quiet_exit_for_closed_stdout()
    except MemclawError as e:
        error_line(e)
        sys.exit(e.exit_code)
    # One no code path said in its own words
    except PermissionError as e:
        from memclaw.permission_errors import from_permission_error

        err = from_permission_error(e)
        error_line(err)
        sys.exit(err.exit_code)
    # After PermissionError and BrokenPipeError, which are OSErrors said above
    except OSError as e:
        if e.errno not in OUTPUT_ERRNOS:
            raise
        exit_for_unwritable_output(e)
    # Outside a command: typer turns one inside into exit code 130, above
    except KeyboardInterrupt:
        from memclaw.cli.common import interrupt_note

        typer.echo(interrupt_note(), err=True)
        sys.exit(130)
    except SystemExit as e:
        if closed_stdout(e):
            quiet_exit_for_closed_stdout()
        if isinstance(e.__context__, OSError) and e.__context__.errno in OUTPUT_ERRNOS:
            exit_for_unwritable_output(e.__context__)
        raise
    # Usage errors arrive here in non-standalone mode
    except Exception as e:
        _exit_for_click(e)
        raise


def _exit_for_click(e: Exception) -> None:
    """Exit for click's own exceptions: usage errors show their message, Exit keeps its code. typer vendors click
    as `typer._click` (and plain click may appear too), so match the classes by name, not by import."""
    names = _class_names(e)
    if "ClickException" in names:
        typer.echo(usage_line(e), err=True)
        sys.exit(getattr(e, "exit_code", 2))
    if "Abort" in names:
        typer.echo("Aborted.", err=True)
        sys.exit(1)
    if "Exit" in names:
        sys.exit(getattr(e, "exit_code", 0))


def usage_line(e: Exception) -> str:
    """A click error as one line (click's own is a usage block of four): its message, which names the option, the
    range an option takes, and where the help is. E.g. `Error: Invalid value for '--k' / '-k': Input should be
    greater than or equal to 1 (--k takes from 1 to 200); see memclaw recall --help`."""
    from memclaw.util.visible import visible

    message = " ".join(str(e.format_message()).split()).rstrip(".")  # type: ignore[attr-defined]
    param = getattr(e, "param", None)
    lo, hi = getattr(param, "min", None), getattr(param, "max", None)
    if "BadParameter" in _class_names(e) and (lo is not None or hi is not None):
        name = param.opts[0] if getattr(param, "opts", None) else param.name  # type: ignore[union-attr]
        allowed = (
            f"from {lo} to {hi}"
            if lo is not None and hi is not None
            else f"at least {lo}"
            if hi is None
            else f"at most {hi}"
        )
        message += f" ({name} takes {allowed})"
    ctx = getattr(e, "ctx", None)
    where = f"; see {ctx.command_path} --help" if ctx is not None and "UsageError" in _class_names(e) else ""
    return visible(f"Error: {message}{where}")


def _class_names(e: Exception) -> set[str]:
    return {c.__name__ for c in type(e).__mro__}


def main() -> None:
    """The console script (and `python -m memclaw.cli.main`): `run` in a process tuned for a short life (see
    memclaw.runtime.startup_gc and leave_quickly), which starts loading the embedding model at once when the command
    will embed a query (memclaw.cli.early). Tests call `run` itself."""
    from memclaw.cli.early import load_model_early
    from memclaw.runtime import leave_quickly, startup_gc
    from memclaw.util.background import wait_for_background

    startup_gc()
    load_model_early(sys.argv[1:])
    try:
        run()
    finally:
        # Whatever the exit: a thread in native code must not outlive the interpreter
        wait_for_background()
        leave_quickly()


if __name__ == "__main__":
    main()
