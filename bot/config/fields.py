"""The kinds of value a setting holds, each read the same way wherever it is used.

A blank value (`TUSK_API_KEY=` as .env.example ships it) is unset (`OrUnset[...]`); a comma list is split
and stripped (`CommaList`); a platform's allow-list takes ids only (`IdList`); a time zone is an IANA name
(`Zone`); a process's Discord shards are `A-B/N` or `A,B,C/N` (`Shards`, read by `shard_set`). The checks
belong to the type, so a new setting of that type gets them by its annotation.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, BeforeValidator, Field, ValidationInfo
from pydantic_settings import NoDecode

from bot.access.allow import ids_only
from memory.chat_settings import zone

T = TypeVar("T")
MAX_SHARDS = 100_000  # far above any bot's (Discord asks for one shard per 1,000 servers)
_SHARDS = re.compile(r"^\s*(\d+(?:\s*-\s*\d+)?(?:\s*,\s*\d+(?:\s*-\s*\d+)?)*)\s*/\s*(\d+)\s*$")
_SHARDS_FORM = "write A-B/N or A,B,C/N: this process's shard ids, then the bot's total, e.g. 0-3/8 (shards 0 to 3 of 8)"


def env(name: str, default: Any, **constraints: Any) -> Any:
    """A field read from the variable `name` (its name everywhere: errors, docs, .env.example)."""
    return Field(default, validation_alias=name, **constraints)


def _blank_is_unset(value: object) -> object:
    return None if isinstance(value, str) and not value.strip() else value


def _split(value: object) -> object:
    return tuple(v.strip() for v in value.split(",") if v.strip()) if isinstance(value, str) else value


def _ids(value: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
    assert info.field_name is not None
    return ids_only(info.field_name.upper(), value)  # usernames stop Tusk here (bot/access/allow.py)


def shard_set(text: str) -> tuple[tuple[int, ...], int]:
    """`0-3/8` -> ((0, 1, 2, 3), 8); `0,2,5/8` -> ((0, 2, 5), 8). ValueError, with the form to write, for a total
    below 1, an id not below the total, an id given twice or a range written backwards."""
    match = _SHARDS.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not a set of shards: {_SHARDS_FORM}")
    count = int(match[2])
    if not 1 <= count <= MAX_SHARDS:
        raise ValueError(f"{text!r}: the total number of shards must be 1 to {MAX_SHARDS:,}; {_SHARDS_FORM}")
    ids: set[int] = set()
    for part in match[1].split(","):
        first, _, last = (p.strip() for p in part.partition("-"))
        low, high = int(first), int(last or first)
        if low > high:
            raise ValueError(f"{text!r}: the range {low}-{high} runs backwards; write {high}-{low}")
        if high >= count:
            raise ValueError(f"{text!r}: shard {high} is not below the total {count} (ids run 0 to {count - 1})")
        if twice := ids.intersection(range(low, high + 1)):
            raise ValueError(f"{text!r}: shard {min(twice)} is named twice; name each shard once")
        ids.update(range(low, high + 1))
    return tuple(sorted(ids)), count


def _shards(text: str) -> str:
    shard_set(text)  # the check; Discord's settings read the ids with shard_set
    return text.strip()


OrUnset = Annotated[T | None, BeforeValidator(_blank_is_unset)]
CommaList = Annotated[tuple[str, ...], NoDecode, BeforeValidator(_split)]
IdList = Annotated[CommaList, AfterValidator(_ids)]  # the field's name is its variable's, in lower case
Zone = Annotated[str, AfterValidator(lambda name: zone(name).key)]  # "'X' is not a time zone I know: use ..."
Shards = Annotated[str, AfterValidator(_shards)]  # "0-3/8"; shard_set() reads it
