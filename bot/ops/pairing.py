"""`tusk pairing list | approve CODE | revoke CHANNEL:ID|CODE`: the owner's side of pairing (bot/pairing.py).

Safe beside a running bot: both sides write pairing.json under its lock, and the bot re-reads it
when it changes, so an approval counts from the sender's next message.
"""

from __future__ import annotations

from datetime import datetime, timezone

from bot.pairing import Approval, PairingStore, Request


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
