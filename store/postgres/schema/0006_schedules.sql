-- Reminders, repeating schedules and check-ins (bot/schedules/store_pg.py): one row per schedule, `record` the
-- line reminders.json keeps for it (bot/schedules/model.py, schema 2: its last runs and their outcomes
-- included), `due` its next run as a column so that a run is claimed by one conditional UPDATE (`WHERE due =
-- the due the claimer read`): of two processes only one starts it. `n` keeps the order they were added in.
CREATE TABLE schedules (
    id       text PRIMARY KEY,
    n        bigint GENERATED ALWAYS AS IDENTITY,
    channel  text NOT NULL,
    chat_id  text NOT NULL,
    due      timestamptz,                 -- NULL: a check-in that has run (kept so its item is not asked again)
    record   json NOT NULL
);
CREATE INDEX schedules_chat ON schedules (channel, chat_id);
CREATE UNIQUE INDEX schedules_n ON schedules (n);
