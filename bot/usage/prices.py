"""What a call cost, and the owner's list of models with their prices (`TUSK_MODELS`).

A call's cost comes from the first of these that knows it:

    provider     the figure the provider sent with the reply (OpenRouter's `usage.cost`)
    litellm      litellm's bundled price table (cached input tokens at their own price where it has one)
    configured   the owner's price for the model in TUSK_MODELS (cached tokens at the input price)
    (None, None) unknown: recorded as unknown, never as 0; token limits apply to it instead

`TUSK_MODELS` is a comma-separated list of `label=model` entries, each optionally followed by
`@IN/OUT`, the price in USD per million input and output tokens:

    TUSK_MODELS=fast=openai/gpt-4o-mini,smart=anthropic/claude-sonnet-4-5,local=openai/tiny@0/0,big=openai/big@2.5/10

A label is 1-32 letters, digits, `_` or `-`. The price is read from after the last `@` only when it has
that shape, so a model name with an `@` of its own (`vertex_ai/claude-3-5-sonnet@20240620`) stays whole.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

LABEL = re.compile(r"[A-Za-z0-9_-]{1,32}")
NUMBER = r"(?:\d+(?:\.\d*)?|\.\d+)"
PRICE = re.compile(rf"(.*)@({NUMBER})/({NUMBER})")


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """USD per million tokens."""

    input_per_mtok: float
    output_per_mtok: float

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input_per_mtok + output_tokens * self.output_per_mtok) / 1_000_000


@dataclass(frozen=True, slots=True)
class ModelChoice:
    """One entry of TUSK_MODELS: what a chat picks (`label`), the litellm model string, the owner's price."""

    label: str
    model: str
    price: ModelPrice | None = None


def parse_models(text: str) -> dict[str, ModelChoice]:
    """TUSK_MODELS's entries by label; ValueError naming the entry that is wrong and how to write it."""
    choices: dict[str, ModelChoice] = {}
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue  # a trailing comma or an empty list
        label, sep, model = (part.strip() for part in entry.partition("="))
        if not sep or not model:
            raise ValueError(f"TUSK_MODELS entry {entry!r} is not label=model: write e.g. fast=openai/gpt-4o-mini")
        if not LABEL.fullmatch(label):
            raise ValueError(f"TUSK_MODELS entry {entry!r}: the label {label!r} must be 1-32 letters, digits, "
                             "'_' or '-'")
        if label in choices:
            raise ValueError(f"TUSK_MODELS entry {entry!r}: the label {label!r} is used twice")
        price = None
        if match := PRICE.fullmatch(model):
            model, price = match[1].strip(), ModelPrice(float(match[2]), float(match[3]))
        elif re.search(r"@[\d.]*/", model):
            raise ValueError(f"TUSK_MODELS entry {entry!r}: a price is written @IN/OUT in USD per million "
                             "tokens, e.g. local=openai/tiny@0/0 or big=openai/big@2.5/10")
        if not model:
            raise ValueError(f"TUSK_MODELS entry {entry!r} names no model before its price")
        choices[label] = ModelChoice(label, model, price)
    return choices


def configured_prices(choices: Mapping[str, ModelChoice]) -> dict[str, ModelPrice]:
    """The owner's prices by model string (what `price` takes as `configured`)."""
    return {c.model: c.price for c in choices.values() if c.price is not None}


def table_cost(model: str, input_tokens: int, output_tokens: int, cached_tokens: int) -> float | None:
    """litellm's price table's figure for the call, or None for a model it does not know. While litellm is
    still loading (a fresh Tusk's first calls), the same table read from its file (bot/llm/catalog.py)."""
    from bot.llm import catalog, loader  # importing litellm takes seconds: never here

    if (lib := loader.loaded()) is None:
        return catalog.cost(model, input_tokens, output_tokens, cached_tokens)
    try:
        cost_in, cost_out = lib.cost_per_token(model=model, prompt_tokens=input_tokens,
                                                     completion_tokens=output_tokens,
                                                     cache_read_input_tokens=cached_tokens)
    except Exception:  # litellm raises plain Exception (or its own kinds) for models it has no price for
        return None
    return cost_in + cost_out


def price(model: str, input_tokens: int, output_tokens: int, cached_tokens: int, provider_cost: float | None,
          configured: Mapping[str, ModelPrice]) -> tuple[float | None, str | None]:
    """(cost in USD, its source: "provider" | "litellm" | "configured"), or (None, None) when unknown.
    `input_tokens` includes `cached_tokens`."""
    if provider_cost is not None:
        return provider_cost, "provider"
    if (cost := table_cost(model, input_tokens, output_tokens, cached_tokens)) is not None:
        return cost, "litellm"
    if (own := configured.get(model)) is not None:
        return own.cost(input_tokens, output_tokens), "configured"
    return None, None
