"""How a message and a turn's results cross the database between processes: the inbox row's record (the
message, its ReplyRef and whether someone watches its reply being written) and the turn_results kinds.

    record = record_of(msg, watched)        # inbox.record
    msg, watched = message_of(record)       # the message as the worker runs it (its id the ingress's)
"""

from __future__ import annotations

import contextvars
import dataclasses
from typing import Any

from bot import inbox
from bot.events import ClientTurn, InboundMessage, ReplyRef, TurnResult

TURN_TASK = "tusk.turn"  # procrastinate's task name for a chat's turn
TURN_QUEUE = "turns"
CHANNEL = "tusk_turn"  # NOTIFY channel: the payload is the inbox id whose results grew
STOP = "tusk_stop"  # NOTIFY channel: a /stop for a chat whose turn may run on another process (its message, JSON)
KINDS = frozenset({"reply", "show", "status", "finish", "done"})
# the inbox row whose turn runs in this context (a worker's job): /forget does not list its own command
ANSWERING: contextvars.ContextVar[int | None] = contextvars.ContextVar("tusk_answering", default=None)


def lock_of(msg: InboundMessage) -> str:
    """procrastinate's lock: a chat's turns run one at a time, in the order they were queued."""
    return f"chat:{msg.key.channel}:{msg.key.chat_id}"


def record_of(msg: InboundMessage, watched: bool) -> dict[str, Any]:
    rec = inbox.record_of(msg)
    for name in ("ref", "client"):
        value = getattr(msg, name)
        rec[name] = dataclasses.asdict(value) if value is not None else None
    rec["watched"] = watched
    return rec


def message_of(rec: dict[str, Any]) -> tuple[InboundMessage, bool]:
    """The message as its channel published it (its id the ingress's: replies name it), and whether an event
    stream watches its reply being written."""
    rec = dict(rec)
    ref, client, watched = rec.pop("ref", None), rec.pop("client", None), bool(rec.pop("watched", False))
    msg = inbox.message_of(rec)
    return dataclasses.replace(msg, id=int(rec["id"]), ref=ReplyRef(**ref) if ref else None,
                               client=ClientTurn(**client) if client else None), watched


def result_of(body: dict[str, Any]) -> TurnResult:
    names = {f.name for f in dataclasses.fields(TurnResult)}
    return TurnResult(**{k: v for k, v in body.items() if k in names})
