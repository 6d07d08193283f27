"""The `tusk backup`, `tusk restore` and `tusk import` commands: arguments and their outcome in words."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

FORMATS = ("telegram", "slack", "discord", "nanobot", "tusk")


def add_arguments(command, chat_key) -> None:
    """The three commands, each with its handler: `command` is bot/ops/cli.py's (name, handler, help) -> parser."""
    backup = command("backup", "bot.ops.archive_cli:backup_command",
                     "the whole data dir in one owner-only .tar.gz (Tusk running or not)")
    backup.add_argument("file", nargs="?", type=Path, help="archive to write (default tusk-backup-TIME.tar.gz)")
    backup.add_argument("--with-secrets", action="store_true",
                        help="also the console token, API keys and a settings file kept in the data dir")
    backup.add_argument("--verify", action="store_true", help="check FILE against its manifest instead")
    restore = command("restore", "bot.ops.archive_cli:restore_command",
                      "a backup back into an empty TUSK_HOME (Tusk stopped)")
    restore.add_argument("file", type=Path)
    restore.add_argument("--force", action="store_true", help="the home is not empty: back it up, then replace it")
    imp = command("import", "bot.ops.archive_cli:import_command", "bring a chat history (Telegram, Slack, Discord, "
                  "nanobot, a tusk export) into Tusk's chats")
    imp.add_argument("source", type=Path)
    imp.add_argument("--format", choices=FORMATS, help="the source's format (recognised when left out)")
    imp.add_argument("--to", type=chat_key, help="CHANNEL:ID to import into (needed when the platform differs)")
    imp.add_argument("--yes", action="store_true",
                     help="write the messages and fold them into memory (without it: the estimate only)")


def backup_command(args: argparse.Namespace, settings) -> int:
    """`tusk backup [FILE] [--with-secrets]`, or `--verify FILE`. BackupError (a ValueError): a one-line error."""
    from bot.ops import backup
    from bot.version import installed as version

    if args.verify:
        if args.file is None:
            raise backup.BackupError("--verify needs the FILE to check")
        manifest = backup.verify(args.file)
        print(f"OK: {len(manifest['files'])} files match the manifest (Tusk {manifest.get('tusk')}, "
              f"{manifest.get('created')})")
        return 0
    os.nice(10)  # a backup can wait: the turns of a Tusk running on this home come first
    target = args.file or Path(backup.default_name())
    entries = backup.create_from(settings.home, settings.store_url(), target, version(), args.with_secrets)
    print(f"Wrote {target} ({len(entries)} files, {sum(e.size for e in entries):,} bytes"
          f"{'' if args.with_secrets else '; secrets left out: --with-secrets keeps them'})")
    return 0


def restore_command(args: argparse.Namespace, settings) -> int:
    from bot.ops import restore
    from bot.version import installed as version

    done = restore.restore(args.file, settings.home, version(), force=args.force, database_url=settings.store_url())
    if done.saved:
        print(f"What was in {settings.home} is saved in {done.saved}")
    into = settings.home if settings.store_url() is None else f"{settings.home} and the database"
    print(f"Restored {done.files} files into {into}")
    if done.left_out:
        print(done.left_out)
    return 0


def import_command(args: argparse.Namespace, settings) -> int:
    """`tusk import`: its lines printed as they come; 1 when folding stopped, 130 after Ctrl-C."""
    import asyncio

    from bot.errors import ConfigError
    from bot.ops.imports import ImportRefused, ImportStopped, run_import

    try:
        asyncio.run(run_import(settings, args.source, args.format, args.to, yes=args.yes,
                               say=lambda line: print(line, flush=True), ask=_yes_to))
    except ImportStopped:
        return 1  # its reason is printed already
    except ConfigError as exc:  # no model to fold with, said after the estimate: the import stops (exit 1)
        raise ImportRefused(str(exc)) from exc
    except KeyboardInterrupt:
        print("Interrupted: what was written is kept; run the same command again to go on", file=sys.stderr)
        return 130
    return 0


def _yes_to(question: str) -> bool:
    """A yes typed at the question; no answer (stdin closed, as from a script) is a no."""
    try:
        return input(question).strip().lower() in ("y", "yes")
    except EOFError:
        print()
        return False
