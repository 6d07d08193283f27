-- The usage ledger (bot/usage/ledger_pg.py): one row per LLM call, the columns of usage.sqlite's `calls`
-- (bot/usage/ledger.py) so that both answer the same queries (bot/usage/ledger_sql.py). `estimated` and
-- `erased` are 0/1 as there; `ts` is unix seconds. /forget keeps the rows of a chat but clears its ids
-- (chat, person) and sets `chat_key` / `person_key`: HMAC-SHA256 of them under the salt of `usage_meta`, so the
-- day's and month's spend still count toward the limits until the keys are pruned (40 days).

CREATE TABLE usage_meta (
    key    text PRIMARY KEY,
    value  bytea NOT NULL            -- 'salt': 32 random bytes, the limit keys' HMAC key
);

CREATE TABLE usage_calls (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    ts             double precision NOT NULL,
    channel        text,
    chat           text,
    person         text,
    purpose        text NOT NULL,
    model          text NOT NULL,
    input_tokens   integer NOT NULL,        -- cached_tokens included (the OpenAI convention)
    output_tokens  integer NOT NULL,
    cached_tokens  integer NOT NULL,
    estimated      smallint NOT NULL CHECK (estimated IN (0, 1)),
    cost_usd       double precision,        -- NULL: the price is unknown (never 0 for that)
    cost_source    text,
    latency_ms     double precision NOT NULL,
    erased         smallint NOT NULL DEFAULT 0 CHECK (erased IN (0, 1)),
    chat_key       bytea,
    person_key     bytea,
    characters     integer NOT NULL DEFAULT 0
);

-- Reports and limit sums read these (the summed columns included, for index-only scans once vacuumed).
CREATE INDEX usage_calls_ts ON usage_calls (ts) INCLUDE (input_tokens, output_tokens, cost_usd);
CREATE INDEX usage_calls_chat ON usage_calls (channel, chat, ts)
    INCLUDE (input_tokens, output_tokens, cached_tokens, cost_usd, characters);
CREATE INDEX usage_calls_person ON usage_calls (channel, person, ts)
    INCLUDE (input_tokens, output_tokens, cached_tokens, cost_usd, characters);
CREATE INDEX usage_calls_model ON usage_calls (model, ts) INCLUDE (cost_usd);
CREATE INDEX usage_calls_chat_key ON usage_calls (chat_key, ts) WHERE chat_key IS NOT NULL;
CREATE INDEX usage_calls_person_key ON usage_calls (person_key, ts) WHERE person_key IS NOT NULL;
CREATE INDEX usage_calls_erased ON usage_calls (ts) WHERE erased = 1 AND (chat_key IS NOT NULL OR person_key IS NOT NULL);
