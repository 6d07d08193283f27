"""The meter between Tusk and its model: every call checked against the limits before, recorded after.

    scope(key, person, purpose)   who a call is for, bound for the code that makes it (a turn, a
                                  consolidation, a background task, a transcription, a doctor probe)
    Meter.admit(model, messages, max_tokens, tools)   the estimate (the whole prompt as the provider
                                  bills it, tool schemas and images included (bot/usage/estimate.py),
                                  plus the reply bound, at the model's price) reserved against every
                                  limit, or `SpendLimitReached`
    Meter.record(admitted, reply figures)      one ledger row with the provider's own figures, and the
                                  reservation settled; `release` when the call failed

bot/llm/client.py calls these around each request it sends (retries and tool steps included), so
each call is recorded exactly once, whoever made it.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timezone
from typing import Any
from zoneinfo import ZoneInfo

from bot import metrics
from bot.errors import LLMError
from bot.events import ChatKey
from bot.usage.estimate import RequestEstimate
from bot.usage.ledger import Call
from bot.usage.ledger_sql import SqlLedger
from bot.usage.limits import Limits, Refusal, Reservation
from bot.usage.prices import ModelPrice, price

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Scope:
    """Who a call is for: the chat (None for housekeeping of no chat), the person whose message caused it
    (None for housekeeping), why it is made, and the chat's time zone (where its day ends)."""

    key: ChatKey | None = None
    person: str | None = None
    purpose: str = "reply"
    zone: str = "UTC"


_current: contextvars.ContextVar[Scope] = contextvars.ContextVar("usage_scope", default=Scope(purpose="other"))


def current() -> Scope:
    return _current.get()


_KEEP: Any = object()


@contextlib.contextmanager
def scope(key: ChatKey | None = None, person: str | None = _KEEP, purpose: str | None = None,
          zone: str | None = None) -> Iterator[Scope]:
    """Bind who the calls made inside are for; what is not given is kept from the enclosing scope (a
    background task started in a turn stays that chat's and that person's; `person=None` for housekeeping
    such as consolidation)."""
    outer = _current.get()
    inner = Scope(key if key is not None else outer.key, outer.person if person is _KEEP else person,
                  purpose or outer.purpose, zone or outer.zone)
    token = _current.set(inner)
    try:
        yield inner
    finally:
        _current.reset(token)


class SpendLimitReached(LLMError):
    """A limit stops the call before it is sent; `user_message` is the refusal's one sentence."""

    doctor_helps = False

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(f"{refusal.limit} limit {'reached' if refusal.reached else 'would be passed'} "
                         f"({refusal.spent:.4f} of {refusal.limit_value:g} used, this call ~{refusal.estimate:.4f})")
        self.refusal = refusal
        self.user_message = refusal.sentence()


@dataclass(slots=True)
class Admitted:
    """A call on its way: its scope, estimate and reservation."""

    scope: Scope
    model: str
    started: float
    input_estimate: int  # the prompt tokens reserved
    reservation: Reservation | None
    counted: int = 0  # the prompt as Tusk counted it, before the model's learned ratio


REPLY_BOUND = 1024  # the reply's tokens reserved when the request sets no max_tokens


class Meter:
    def __init__(self, ledger: SqlLedger, limits: Limits | None = None,
                 prices: dict[str, ModelPrice] | None = None) -> None:
        self.ledger, self.limits, self.prices = ledger, limits, dict(prices or {})
        self.estimate = RequestEstimate()

    def admit(self, model: str, messages: list[dict[str, Any]], max_tokens: int | None,
              tools: list[dict[str, Any]] | None = None) -> Admitted:
        """Reserve the call's estimate (the whole request: messages, images and tool schemas), or raise
        SpendLimitReached (logged once per limit per day)."""
        sc = current()
        counted = self.estimate.counted(messages, tools)
        tokens = self.estimate.scaled(model, counted)
        reservation = None
        if self.limits is not None:
            reply = max_tokens or REPLY_BOUND
            cost, _ = price(model, tokens, reply, 0, None, self.prices)
            outcome = self.limits.check(sc.key.channel if sc.key else "", sc.key.chat_id if sc.key else None,
                                        sc.person, cost, tokens + reply, sc.purpose, zone_of(sc.zone))
            if isinstance(outcome, Refusal):
                if self.limits.notice_due(outcome):
                    logger.warning("spend limit reached: %s for %s; calls are refused until %s",
                                   outcome.limit, _who(outcome), outcome.resets_at.isoformat(timespec="minutes"))
                raise SpendLimitReached(outcome)
            reservation = outcome
        return Admitted(sc, model, time.monotonic(), tokens, reservation, counted)

    def record(self, admitted: Admitted, model: str, input_tokens: int, output_tokens: int, cached_tokens: int = 0,
               provider_cost: float | None = None, own_output: int | None = None) -> None:
        """The call's row in the ledger (the provider's figures; Tusk's own count where it gave none, marked
        so), then its reservation settled."""
        estimated = not input_tokens and not output_tokens
        if input_tokens and model == admitted.model:
            self.estimate.learn(model, admitted.counted, input_tokens)
        if estimated:
            input_tokens, output_tokens = admitted.input_estimate, own_output or 0
        cost, source = price(model, input_tokens, output_tokens, cached_tokens, provider_cost, self.prices)
        sc = admitted.scope
        try:
            self.ledger.record(Call(ts=time.time(), channel=sc.key.channel if sc.key else None,
                                    chat=sc.key.chat_id if sc.key else None, person=sc.person,
                                    purpose=sc.purpose, model=model, input_tokens=input_tokens,
                                    output_tokens=output_tokens, cached_tokens=min(cached_tokens, input_tokens),
                                    estimated=estimated, cost_usd=cost, cost_source=source,
                                    latency_ms=(time.monotonic() - admitted.started) * 1000))
        except Exception:  # the ledger is bookkeeping: a full disk must not fail the reply the user waits for
            logger.exception("could not record an LLM call in the usage ledger")
        finally:
            if admitted.reservation is not None:
                admitted.reservation.settle()
        metrics.llm_call(sc.purpose or "other", model, input_tokens, output_tokens, cost,
                         time.monotonic() - admitted.started)

    def note(self, model: str, purpose: str, cost_usd: float | None, latency_ms: float) -> None:
        """A call that is not a chat completion (a transcription): recorded under the current chat and person,
        its tokens unknown (marked as Tusk's own count), its cost where litellm gave one."""
        sc = current()
        try:
            self.ledger.record(Call(ts=time.time(), channel=sc.key.channel if sc.key else None,
                                    chat=sc.key.chat_id if sc.key else None, person=sc.person, purpose=purpose,
                                    model=model, input_tokens=0, output_tokens=0, estimated=True, cost_usd=cost_usd,
                                    cost_source="litellm" if cost_usd is not None else None, latency_ms=latency_ms))
        except Exception:  # bookkeeping: never fails the work it records
            logger.exception("could not record a %s call in the usage ledger", purpose)

    def release(self, admitted: Admitted) -> None:
        if admitted.reservation is not None:
            admitted.reservation.release()


def zone_of(name: str) -> Any:
    """The time zone named `name`; UTC for a name that is none."""
    try:
        return ZoneInfo(name)
    except (KeyError, ValueError):
        return timezone.utc


def _who(refusal: Refusal) -> str:
    kind = refusal.scope[0]
    return "the whole bot" if kind == "owner" else f"{kind} {':'.join(refusal.scope[1:])}"
