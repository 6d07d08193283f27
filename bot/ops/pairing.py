"""The owner's side of pairing (bot/access/pairing.py): `tusk pairing list | approve CODE | revoke CHANNEL:ID|CODE`,
and the same as JSON routes of the local HTTP API / console (`routes`).

Safe beside a running bot: both sides write pairing.json under its lock, and the bot re-reads it
when it changes, so an approval counts from the sender's next message.
"""

from __future__ import annotations

import argparse
import dataclasses
from datetime import datetime, timezone

from aiohttp import web

from bot.access.pairing import Approval, PairingError, PairingStore, Request
from bot.config import Settings


def _when(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _who(item: Approval | Request) -> str:
    name = f" ({item.name})" if item.name else ""
    return f"{item.channel}:{item.id} {item.kind}{name}"


def listing(store: PairingStore) -> str:
    state = store.state().live(store.clock())
    lines = ["Waiting for approval:" if state.pending else "No pairing request is waiting."]
    lines += [f"  {r.code}  {_who(r)}, expires {_when(r.expires)}" for r in state.pending]
    lines.append("Approved:" if state.approved else "No one approved by pairing yet (*_ALLOW_FROM still applies).")
    lines += [f"  {_who(a)}, since {_when(a.at)}" for a in state.approved]
    return "\n".join(lines)


def approve(store: PairingStore, code: str) -> str:
    a = store.approve(code)
    whom = "everyone in that group" if a.kind == "group" else "that user"
    return f"Approved {_who(a)}: Tusk now answers {whom}. `tusk pairing revoke {a.channel}:{a.id}` undoes it."


def revoke(store: PairingStore, target: str) -> str:
    gone = store.revoke(target)
    if not gone:
        raise LookupError(f"no approval for {target!r} and no pending code like it (see `tusk pairing list`)")
    return "\n".join(f"Revoked {_who(item)}" if isinstance(item, Approval) else f"Dropped the request {item.code} "
                     f"of {_who(item)}" for item in gone)


def command(args: argparse.Namespace, settings: Settings) -> int:
    """`tusk pairing list | approve CODE | revoke TARGET` (called by bot/ops/cli.py)."""
    store = PairingStore(settings.home, settings.pairing_ttl * 60, settings.pairing_max_pending)
    print(listing(store) if args.action == "list" else
          approve(store, args.code) if args.action == "approve" else revoke(store, args.target))
    return 0


def _row(item: Approval | Request) -> dict[str, object]:
    return dataclasses.asdict(item)


def routes(store: PairingStore) -> list[web.RouteDef]:
    """The console's side (mounted on the HTTP channel, behind its token and guards):

        GET  /api/pairing           -> {"pending": [...], "approved": [...]}
        POST /api/pairing/approve   {"code": "K7QXM2PA"}      -> {"approved": {...}} | 404 {"error": ...}
        POST /api/pairing/revoke    {"target": "telegram:42"} -> {"removed": [...]}  | 404 {"error": ...}
    """
    async def show(request: web.Request) -> web.Response:
        state = store.state().live(store.clock())
        return web.json_response({"pending": [_row(r) for r in state.pending],
                                  "approved": [_row(a) for a in state.approved]})

    async def change(request: web.Request) -> web.Response:
        field = "code" if request.path.endswith("/approve") else "target"
        if request.content_type != "application/json":
            return web.json_response({"error": "send a JSON body (Content-Type: application/json)"}, status=415)
        try:
            body = await request.json()
            value = body[field]
            if not isinstance(value, str) or not value.strip():
                raise TypeError
        except (ValueError, KeyError, TypeError):
            return web.json_response({"error": f'send {{"{field}": "..."}}'}, status=400)
        try:
            if field == "code":
                return web.json_response({"approved": _row(store.approve(value))})
            gone = store.revoke(value.strip())
            if not gone:
                raise LookupError(f"no approval for {value!r} and no pending code like it")
            return web.json_response({"removed": [_row(item) for item in gone]})
        except LookupError as exc:
            return web.json_response({"error": exc.args[0]}, status=404)
        except PairingError as exc:
            return web.json_response({"error": str(exc)}, status=500)

    return [web.get("/api/pairing", show), web.post("/api/pairing/approve", change),
            web.post("/api/pairing/revoke", change)]
