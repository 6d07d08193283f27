"""The PostgreSQL backend (TUSK_DATABASE_URL): psycopg 3, async, one connection pool per process.

    url.py          the setting parsed and shown without its password
    pool.py         the pool, and psycopg's errors translated into the store's (store/errors.py)
    migrations.py   the versioned schema (schema/NNNN_name.sql), applied at start under an advisory lock
"""
