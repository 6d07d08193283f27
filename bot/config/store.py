"""Where Tusk keeps what it knows (store/): files under TUSK_HOME, or a PostgreSQL database. A concern of
`bot.config.Settings`."""

from __future__ import annotations

from pydantic import BaseModel, SecretStr

from bot.config.fields import OrUnset, env


class StoreConfig(BaseModel):
    """TUSK_DATABASE_URL: everything Tusk keeps in that database instead of files (store/postgres/)."""
    # postgresql://user:password@host:5432/db; unset: files under TUSK_HOME, one Tusk per home
    database_url: OrUnset[SecretStr] = env("TUSK_DATABASE_URL", None)
    # with a database: the turns (of different chats) one worker process runs at once (docs: Scaling out)
    worker_turns: int = env("TUSK_WORKER_TURNS", 8, ge=1, le=256)

    def store_url(self) -> str | None:
        """The database's URL (None: files)."""
        return self.database_url.get_secret_value() if self.database_url is not None else None

    def database_secrets(self) -> list[str]:
        """The URL's password on its own as well (a driver's message may quote it without the rest)."""
        if self.database_url is None:
            return []
        from store.postgres.url import password

        return [p for p in [password(self.database_url.get_secret_value())] if p]
