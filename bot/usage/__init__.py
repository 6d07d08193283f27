"""Usage and spend limits (issue 30): what every LLM call cost, and stopping calls past the owner's limits.

    ledger.py   `Ledger`: one row per call (`Call`) in $TUSK_HOME/usage.sqlite (0600, WAL; survives
                kill -9); totals, reports by day/chat/person/model/purpose, erasure that keeps limit keys
    prices.py   `price()`: the provider's figure, else litellm's table, else the owner's price, else
                unknown (None, never 0); `parse_models()` reads TUSK_MODELS (`label=model@IN/OUT`)
    limits.py   `Limits`: daily/monthly USD limits (owner, chat, person; per-chat overrides in
                $TUSK_HOME/budgets.json) and token limits for unknown prices, checked with reservations
                so concurrent calls cannot run past a limit; `Refusal.sentence()` for the person

Nothing here calls a model or knows the turn: the agent records each call and asks `Limits.check`
before it.
"""
