"""Slack events and slash commands as Slack writes them, built for the fake Slack (tests/fakes/fake_slack.py).

Shapes follow docs.slack.dev/reference/events/message and its subtype pages, app_mention, and
payloads real workspaces sent (client_msg_id, team / user_team / source_team on user messages).
"""

from __future__ import annotations

import itertools
import time
from typing import Any


class SlackEvents:
    """Builders mixed into FakeSlack: they use its workspace (team, bot user, users) and its clocks."""

    team_id: str
    bot_user_id: str
    base_url: str
    users: dict[str, dict[str, Any]]
    _ids: itertools.count[int]
    _clock: itertools.count[int]

    def next_ts(self) -> str:
        """A fresh message timestamp, as Slack's `ts` strings look."""
        return f"{1_700_000_000 + next(self._clock)}.000100"

    def dm(self, text: str, *, user: str = "U0ANN", channel: str = "D0ANN", ts: str | None = None,
           thread_ts: str | None = None, **extra: Any) -> dict[str, Any]:
        """A `message` event in a direct message with the bot."""
        event = {"type": "message", "channel_type": "im", "channel": channel, "user": user, "text": text,
                 "ts": ts or self.next_ts(), **self._message_fields(user), **extra}
        if thread_ts:
            event["thread_ts"] = thread_ts
        event["event_ts"] = event["ts"]
        return event

    def mention(self, text: str, *, user: str = "U0ANN", channel: str = "C0GENERAL", ts: str | None = None,
                thread_ts: str | None = None, **extra: Any) -> dict[str, Any]:
        """An `app_mention` event: the bot's mention is put in front of `text`."""
        event = {"type": "app_mention", "channel": channel, "user": user, "text": f"<@{self.bot_user_id}> {text}",
                 "ts": ts or self.next_ts(), **self._message_fields(user), **extra}
        if thread_ts:
            event["thread_ts"] = thread_ts
        event["event_ts"] = event["ts"]
        return event

    def _message_fields(self, user: str) -> dict[str, Any]:
        """What Slack adds to every user message: a client id and the sender's team(s)."""
        team = self.users.get(user, {}).get("team_id", self.team_id)
        return {"client_msg_id": f"{next(self._ids):08d}-fake-client-msg", "team": team, "user_team": team,
                "source_team": team}

    def channel_message(self, text: str, *, user: str = "U0ANN", channel: str = "C0GENERAL", ts: str | None = None,
                        thread_ts: str | None = None, **extra: Any) -> dict[str, Any]:
        """A `message` event in a channel (message.channels), as every member's message arrives."""
        event = {"type": "message", "channel_type": "channel", "channel": channel, "user": user, "text": text,
                 "ts": ts or self.next_ts(), **self._message_fields(user), **extra}
        if thread_ts:
            event.update(thread_ts=thread_ts, parent_user_id=extra.get("parent_user_id", user))
        event["event_ts"] = event["ts"]
        return event

    def as_message(self, mention: dict[str, Any]) -> dict[str, Any]:
        """The `message` event Slack sends beside an `app_mention` for the same message (same ts and client id)."""
        return {**mention, "type": "message", "channel_type": "channel"}

    def edited(self, event: dict[str, Any], text: str) -> dict[str, Any]:
        """The message_changed event for an edit of `event`'s message: no user at the top, hidden."""
        now = self.next_ts()
        old = {k: v for k, v in event.items() if k not in ("channel", "channel_type", "event_ts")}
        new = {**old, "text": text, "edited": {"user": event.get("user"), "ts": now}}
        return {"type": "message", "subtype": "message_changed", "hidden": True, "channel": event["channel"],
                "channel_type": event.get("channel_type", "channel"), "ts": now, "event_ts": now,
                "message": new, "previous_message": old}

    def edited_mention(self, mention: dict[str, Any], text: str, *, after: float = 5.0) -> dict[str, Any]:
        """The `app_mention` Slack sends when a message is edited (`after` seconds on) to mention the bot, or
        edited again while it does."""
        edited_ts = f"{float(mention['ts']) + after:.6f}"
        event = {k: v for k, v in mention.items() if k != "channel_type"}  # app_mention events carry none
        return {**event, "type": "app_mention", "text": text, "edited": {"user": mention["user"], "ts": edited_ts},
                "event_ts": edited_ts}

    def deleted(self, event: dict[str, Any]) -> dict[str, Any]:
        now = self.next_ts()
        return {"type": "message", "subtype": "message_deleted", "hidden": True, "channel": event["channel"],
                "channel_type": event.get("channel_type", "channel"), "ts": now, "event_ts": now,
                "deleted_ts": event["ts"], "previous_message": {k: v for k, v in event.items() if k != "channel"}}

    def subtyped(self, subtype: str, text: str = "", *, user: str | None = "U0ANN", channel: str = "C0GENERAL",
                 **extra: Any) -> dict[str, Any]:
        """A message event of any other subtype (channel_join, bot_message, huddle_thread, ...)."""
        ts = self.next_ts()
        event = {"type": "message", "subtype": subtype, "channel": channel, "text": text, "ts": ts, "event_ts": ts,
                 "channel_type": "im" if channel.startswith("D") else "channel", **extra}
        if user:
            event["user"] = user
        return event

    def event_body(self, event: dict[str, Any], event_id: str | None = None, **fields: Any) -> dict[str, Any]:
        """The Events API `event_callback` body around `event`; `fields` override or add wrapper fields."""
        return {**self._body(event, event_id), **fields}

    def _body(self, event: dict[str, Any], event_id: str | None) -> dict[str, Any]:
        return {"token": "legacy-verification-token", "team_id": self.team_id, "api_app_id": "A0TUSK",
                "event": event, "type": "event_callback", "event_id": event_id or f"Ev{next(self._ids):08d}",
                "event_time": int(float(event.get("ts", time.time()))),
                "authorizations": [{"enterprise_id": None, "team_id": self.team_id, "user_id": self.bot_user_id,
                                    "is_bot": True, "is_enterprise_install": False}],
                "is_ext_shared_channel": False, "event_context": f"4-fake-{next(self._ids)}"}

    def command_payload(self, command: str, text: str = "", *, user: str = "U0ANN", channel: str = "D0ANN",
                        channel_name: str | None = None) -> dict[str, str]:
        """A slash command payload; its response_url points at this fake."""
        n = next(self._ids)
        if channel_name is None:
            channel_name = "directmessage" if channel.startswith("D") else "general"
        return {"token": "legacy-verification-token", "team_id": self.team_id, "team_domain": "fake",
                "channel_id": channel, "channel_name": channel_name, "user_id": user,
                "user_name": self.users.get(user, {}).get("name", user.lower()), "command": command, "text": text,
                "api_app_id": "A0TUSK", "is_enterprise_install": "false",
                "response_url": f"{self.base_url}/respond/{n}", "trigger_id": f"{n}.fake.trigger"}
