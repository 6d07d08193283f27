"""What reading a reply out costs: checked against the spend limits before, recorded in the ledger after.

    SpeechMeter.admit(characters)          the estimate reserved against every limit that applies to the
                                           chat and its sender (bot/usage/limits.py), or SpendLimitReached
    SpeechMeter.record(admitted, ...)      one usage ledger row: purpose `speech`, the model (or
                                           `command:<program>`), the characters read out, the cost

The price, from the first that knows it:

    litellm     litellm's price list: per character (tts-1: $15 per million), else per second of audio
                plus the text's tokens (gpt-4o-mini-tts)
    configured  TUSK_TTS_PRICE, USD per million characters
    local       a TUSK_TTS_COMMAND engine without TUSK_TTS_PRICE: it runs here, for nothing ($0)
    unknown     recorded as unknown (never $0); its characters / 4 count as tokens against the token limits
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from bot import metrics
from bot.usage import meter as usage
from bot.usage.ledger import Call
from bot.usage.ledger_sql import SqlLedger
from bot.usage.limits import Limits, Refusal

logger = logging.getLogger(__name__)

CHARS_PER_SECOND = 15.0  # speech runs about this fast: the estimate of a reply's seconds before it is spoken
CHARS_PER_TOKEN = 4


@dataclass(frozen=True, slots=True)
class Price:
    """USD per character, per second of audio and per token of text (any may be 0), and where it came from."""

    per_char: float = 0.0
    per_second: float = 0.0
    per_token: float = 0.0
    source: str = "litellm"

    def cost(self, characters: int, seconds: float) -> float:
        return (characters * self.per_char + seconds * self.per_second
                + characters / CHARS_PER_TOKEN * self.per_token)


def table_price(model: str) -> Price | None:
    """litellm's price for a speech model, or None for one its list does not price (imports litellm)."""
    from bot.llm.loader import litellm

    try:
        info: dict[str, Any] = dict(litellm().get_model_info(model))
    except Exception:  # litellm raises plain Exception for models it does not know
        return None
    per_char = info.get("input_cost_per_character") or 0.0
    per_second = info.get("output_cost_per_second") or 0.0
    if not per_char and not per_second:
        return None
    return Price(per_char, per_second, 0.0 if per_char else info.get("input_cost_per_token") or 0.0, "litellm")


class SpeechMeter:
    def __init__(self, ledger: SqlLedger, limits: Limits | None, model: str, price: Price | None,
                 priced_by_table: bool) -> None:
        self.ledger, self.limits, self.model = ledger, limits, model
        self._own = price  # the owner's price, or $0 for a local engine
        self._by_table = priced_by_table  # look in litellm's list first (a provider model)
        self._table: Price | None = None
        self._looked = False

    def price(self) -> Price | None:
        """The price in force: litellm's (looked up once), else the owner's or a local engine's, else None."""
        if self._by_table and not self._looked:
            self._table, self._looked = table_price(self.model), True
        return self._table or self._own

    def admit(self, characters: int) -> usage.Admitted:
        """Reserve the estimate against every limit (purpose speech), or raise SpendLimitReached."""
        sc = usage.current()
        price = self.price()
        estimate = price.cost(characters, characters / CHARS_PER_SECOND) if price else None
        tokens = characters // CHARS_PER_TOKEN + 1
        reservation = None
        if self.limits is not None:
            outcome = self.limits.check(sc.key.channel if sc.key else "", sc.key.chat_id if sc.key else None,
                                        sc.person, estimate, tokens, "speech", usage.zone_of(sc.zone))
            if isinstance(outcome, Refusal):
                if self.limits.notice_due(outcome):
                    logger.warning("spend limit reached: %s; replies are not read out until %s", outcome.limit,
                                   outcome.resets_at.isoformat(timespec="minutes"))
                raise usage.SpendLimitReached(outcome)
            reservation = outcome
        return usage.Admitted(sc, self.model, time.monotonic(), tokens, reservation)

    def record(self, admitted: usage.Admitted, characters: int, seconds: float) -> float | None:
        """The synthesis's ledger row (its reservation settled); returns its cost (None: unknown)."""
        price = self.price()
        cost = price.cost(characters, seconds) if price else None
        sc = admitted.scope
        tokens = characters // CHARS_PER_TOKEN
        try:
            self.ledger.record(Call(ts=time.time(), channel=sc.key.channel if sc.key else None,
                                    chat=sc.key.chat_id if sc.key else None, person=sc.person, purpose="speech",
                                    model=self.model, input_tokens=tokens, output_tokens=0, estimated=True,
                                    cost_usd=cost, cost_source=price.source if price else None,
                                    latency_ms=(time.monotonic() - admitted.started) * 1000, characters=characters))
        except Exception:  # the ledger is bookkeeping: a full disk must not cost the reply its voice
            logger.exception("could not record a speech call in the usage ledger")
        finally:
            if admitted.reservation is not None:
                admitted.reservation.settle()
        metrics.llm_call("speech", self.model, tokens, 0, cost, time.monotonic() - admitted.started)
        return cost

    @staticmethod
    def release(admitted: usage.Admitted) -> None:
        if admitted.reservation is not None:
            admitted.reservation.release()
