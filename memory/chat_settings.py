"""A chat's own settings, its `settings.json` document (store/base.py): its time zone, whether a group's
messages not addressed to the bot are kept (`listen`, /listen; default off), the label of
the model it picked with /model (one of TUSK_MODELS; none: the default model), whether its
replies are read out (`voice`, /voice: on, off or auto; none: TUSK_VOICE_REPLIES), and whether Tusk
checks in on its open items (`checkins`, /checkins; default off).

    {"schema": 1, "timezone": "Europe/Berlin", "listen": false, "model": "fast", "voice": "auto",
     "checkins": false}

Pure: the store reads and writes the document whole (`parse`, `dump`); /forget deletes it with the rest of
the chat. A missing document means the defaults; an unreadable one is logged and read as the defaults.
"""

from __future__ import annotations

import functools
import json
import logging
from dataclasses import dataclass
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError


logger = logging.getLogger(__name__)

SCHEMA = 1


@dataclass(frozen=True, slots=True)
class ChatSettings:
    timezone: str | None = None  # an IANA name; None: the bot's default (TUSK_TIMEZONE)
    listen: bool = False  # a group's chatter not addressed to the bot is saved (no reply, no LLM call)
    model: str | None = None  # a TUSK_MODELS label picked with /model; None: the default model
    voice: Literal["on", "off", "auto"] | None = None  # /voice; None: the owner's TUSK_VOICE_REPLIES
    checkins: bool = False  # Tusk asks about the chat's dated open items the day after (bot/schedules/checkins.py)


def zone(name: str) -> ZoneInfo:
    """The IANA time zone `name`; a ValueError that says what to write instead if there is none."""
    try:
        return ZoneInfo(name.strip())
    except (ZoneInfoNotFoundError, ValueError) as exc:  # ValueError: not even a well-formed key
        raise ValueError(f"{name!r} is not a time zone I know: use an IANA name such as Europe/Berlin, "
                         "America/New_York or Asia/Tokyo") from exc


@functools.lru_cache(maxsize=1024)
def parse(text: str | None) -> ChatSettings:
    """The settings in settings.json's text: the defaults when there is none; an unreadable one (a hand edit
    gone wrong) is logged and read as the defaults, never fatal."""
    if text is None:
        return ChatSettings()
    try:
        raw = json.loads(text)
        tz = raw.get("timezone")
        if tz is not None:
            zone(tz)
        listen = raw.get("listen", False)
        if not isinstance(listen, bool):
            raise ValueError(f"listen is {listen!r}, not true or false")
        model = raw.get("model")
        voice = raw.get("voice")
        if voice not in (None, "on", "off", "auto"):
            raise ValueError(f"voice is {voice!r}, not on, off or auto")
        checkins = raw.get("checkins", False)
        if not isinstance(checkins, bool):
            raise ValueError(f"checkins is {checkins!r}, not true or false")
        return ChatSettings(timezone=tz, listen=listen, model=model if isinstance(model, str) and model else None,
                            voice=voice, checkins=checkins)
    except (ValueError, AttributeError) as exc:
        logger.warning("a chat's settings.json is unreadable (%s); using the default settings", exc)
        return ChatSettings()


def dump(settings: ChatSettings) -> str:
    record = {"schema": SCHEMA, "timezone": settings.timezone, "listen": settings.listen, "model": settings.model,
              "voice": settings.voice, "checkins": settings.checkins}
    return json.dumps(record, ensure_ascii=False, indent=1) + "\n"


def zone_of(settings: ChatSettings, default: ZoneInfo) -> ZoneInfo:
    """The chat's own time zone, else `default`."""
    return zone(settings.timezone) if settings.timezone else default
