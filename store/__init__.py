"""Where Tusk keeps what it knows: the store seam and its two backends.

    store/files/      today's files under $TUSK_HOME (the default: one process, nothing to install)
    store/postgres/   one PostgreSQL database (TUSK_DATABASE_URL): several processes on several machines

`memory/` holds the pure logic (what a session, a consolidation round, a fact is); this package holds
where it is kept. Nothing here imports `bot/` or `channels/`.
"""
