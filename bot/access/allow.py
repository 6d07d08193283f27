"""The allow-lists' form: ids only, checked when the settings are read.

A username (`@bob`, `bob`, `bob#1234`) can be changed by its owner and then claimed by anyone else,
who would inherit the access. So `*_ALLOW_FROM` entries that are not ids stop Tusk at start, with the
way to find the id in the message; nothing is resolved behind the operator's back.
"""

from __future__ import annotations

import re

from bot.errors import ConfigError

IDS = {  # variable -> (what an id looks like, an example, where to find one)
    "TELEGRAM_ALLOW_FROM": (re.compile(r"-?\d{1,20}"), "123456789 (a user) or -1001234567890 (a group)",
                            "write to the bot and read the id in Tusk's log ('ignoring messages from ...'), "
                            "or in the pairing request (`tusk pairing list`)"),
    "DISCORD_ALLOW_FROM": (re.compile(r"\d{15,21}|\d{1,14}"), "80351110224678912 (a user or a server)",
                           "turn on Developer Mode in Discord and use 'Copy User ID' / 'Copy Server ID'"),
    "SLACK_ALLOW_FROM": (re.compile(r"[UWCGD][A-Z0-9]{1,20}"), "U0123ABCD (a user) or C0123ABCD (a channel)",
                         "open the person's profile in Slack, ... (More) -> 'Copy member ID'"),
}


def ids_only(variable: str, entries: tuple[str, ...]) -> tuple[str, ...]:
    """`entries` unchanged if every one is an id of the platform `variable` is for; else a ConfigError naming
    the first username and how to find the id instead."""
    pattern, example, where = IDS[variable]
    for entry in entries:
        if not pattern.fullmatch(entry):
            raise ConfigError(
                f"{variable} contains {entry!r}, which is not an id: usernames can be changed and then taken "
                f"by someone else, so Tusk only accepts ids here, such as {example}. To find one: {where}.")
    return entries
