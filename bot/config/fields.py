"""The kinds of value a setting holds, each read the same way wherever it is used.

A blank value (`TUSK_API_KEY=` as .env.example ships it) is unset (`OrUnset[...]`); a comma list is split
and stripped (`CommaList`); a platform's allow-list takes ids only (`IdList`); a time zone is an IANA name
(`Zone`). The checks belong to the type, so a new setting of that type gets them by its annotation.
"""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, BeforeValidator, Field, ValidationInfo
from pydantic_settings import NoDecode

from bot.access.allow import ids_only
from memory.chat_settings import zone

T = TypeVar("T")


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


OrUnset = Annotated[T | None, BeforeValidator(_blank_is_unset)]
CommaList = Annotated[tuple[str, ...], NoDecode, BeforeValidator(_split)]
IdList = Annotated[CommaList, AfterValidator(_ids)]  # the field's name is its variable's, in lower case
Zone = Annotated[str, AfterValidator(lambda name: zone(name).key)]  # "'X' is not a time zone I know: use ..."
