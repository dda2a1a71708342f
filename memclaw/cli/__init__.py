"""The `memclaw` command: thin command functions over the packages below.

The public API is `main`, the console script's entry point (`memclaw.cli.main:main`).
Every other module is the command's internals: the commands (`*_cmd`, `memory_cmds`, `bench_app`), the shared
loading (`common`), the early model load (`early`), `--sender` (`sender_opt`), the tables (`tables`) and the exits
(`exits`). See ARCHITECTURE.md for the layers and the rule each import follows.
"""

__all__ = ["main"]
