"""Usage and spend limits (issue 30): what every LLM call cost, and stopping calls past the owner's limits.

    ledger.py   `Ledger`: one row per call (`Call`) in $TUSK_HOME/usage.sqlite (0600, WAL; survives
                kill -9); totals, reports by day/chat/person/model/purpose, erasure that keeps limit keys
    prices.py   `price()`: the provider's figure, else litellm's table, else the owner's price, else
                unknown (None, never 0); `parse_models()` reads TUSK_MODELS (`label=model@IN/OUT`)
    limits.py   `Limits`: daily/monthly USD limits (owner, chat, person) and token limits for unknown
                prices, checked with reservations so concurrent calls cannot run past a limit;
                `Refusal.sentence()` for the person
    budgets.py  a chat's own daily limits (USD, tokens) in $TUSK_HOME/budgets.json
    estimate.py what a request holds before it is sent (messages, images, tool schemas): the reservation
    meter.py    the LLM boundary's check before each call and record after it
    unpriced.py the USD limits that cannot count a model without a known price, and what can
    view.py     /usage, /status's spend lines, `tusk usage`'s table
    erasure.py  the ledger's part of /forget

Nothing here calls a model or knows the turn: the agent records each call and asks `Limits.check`
before it.
"""
