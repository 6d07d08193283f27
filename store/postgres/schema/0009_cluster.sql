-- Several processes on one database (bot/cluster/, docs: Scaling out).
--
-- turn_results: what a turn said, for the process holding the request that asked (the HTTP API, its event
-- streams, the OpenAI endpoint), whichever worker ran it. A worker writes a row per reply, draft update or
-- the turn's end (`kind`: reply, show, status, finish, done) and NOTIFYs `tusk_turn` with the inbox id; the
-- process waiting LISTENs. Rows are kept an hour (an Idempotency-Key's repeat gets the first answer), then
-- pruned; /forget deletes a chat's at once.
CREATE TABLE turn_results (
    n        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,  -- the order they were written in
    inbox    bigint NOT NULL,                  -- the inbox row's id: the message's id across the cluster
    channel  text NOT NULL,
    chat_id  text NOT NULL,
    kind     text NOT NULL,
    body     jsonb NOT NULL,
    at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX turn_results_inbox ON turn_results (inbox, n);
CREATE INDEX turn_results_chat ON turn_results (channel, chat_id);
CREATE INDEX turn_results_at ON turn_results (at);

-- A message's turn saved once, whatever runs it: the first run of a queued turn (its inbox id) to write into
-- the chat claims it (store/fence.py); a second run of the same message (a worker thought dead that was only
-- slow) writes nothing, and the worker that runs a message again sends the claimed run's saved replies.
CREATE TABLE turn_claims (
    inbox  bigint PRIMARY KEY,
    run    text NOT NULL,
    at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX turn_claims_at ON turn_claims (at);

-- An HTTP request's Idempotency-Key: the first request's inbox id, so a repeat (to any ingress, during or
-- after the first) waits for and returns the first one's answer and runs nothing again. Kept as long as the
-- results are.
CREATE TABLE idempotency (
    channel  text NOT NULL,
    key      text NOT NULL,
    inbox    bigint NOT NULL,
    chat_id  text NOT NULL,
    at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (channel, chat_id, key)      -- a key names a request of one chat: never another chat's answer
);
CREATE INDEX idempotency_at ON idempotency (at);
