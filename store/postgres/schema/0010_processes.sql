-- The processes serving this database (bot/cluster/processes.py), for `tusk status`: a row per running Tusk,
-- written when it starts and deleted when it stops. Every `beat_seconds` it sets `heartbeat` (the database's
-- clock, so the machines' clocks do not matter) and its turns in flight. A process that died leaves its row:
-- its heartbeat goes stale (older than three beats) and is shown so; the next beat of any live process
-- deletes it an hour later. `url` is where its HTTP server answers (/healthz, /readyz, /metrics), never a
-- token; NULL when it serves none.
CREATE TABLE processes (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    role          text NOT NULL,                    -- all, ingress or worker (`tusk run --role`)
    host          text NOT NULL,
    pid           integer NOT NULL,
    version       text NOT NULL,
    url           text,
    started       timestamptz NOT NULL DEFAULT now(),
    heartbeat     timestamptz NOT NULL DEFAULT now(),
    beat_seconds  real NOT NULL CHECK (beat_seconds > 0),
    in_flight     integer NOT NULL DEFAULT 0 CHECK (in_flight >= 0)
);
