"""`tusk skills list`: every skill folder found, its source, whether it is offered, and why not."""

from __future__ import annotations

import argparse

def add_arguments(command) -> None:
    """`command`: bot/ops/cli.py's (name, handler, help) -> parser."""
    skills = command("skills", "bot.skills.cli:run",
                     "the skills (playbooks in $TUSK_HOME/skills): which are offered, and why not")
    actions = skills.add_subparsers(dest="action", metavar="ACTION", required=True)
    actions.add_parser("list", help="every skill found: its source, offered or not and why, the chats it goes to")


def run(args: argparse.Namespace, settings) -> int:
    from bot.skills.catalog import Catalog
    from bot.skills.views import listing

    skill_settings = settings.skill_settings()
    print(listing(skill_settings, Catalog(skill_settings.roots, log=False)))
    return 0
