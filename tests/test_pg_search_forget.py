"""`/forget member` over the PostgreSQL store: its search seam answers `holds` and `drop` as ChatSearch says
(they were once unreachable, nested under a helper, so the erasure's search step raised AttributeError)."""

from memory.keys import ChatKey
from memory.session import Message
from store.postgres import migrations
from store.postgres.chats import PgChats
from store.postgres.pool import Database
from store.postgres.search import PgSearch

KEY = ChatKey("http", "forget-member")


async def test_pg_search_holds_no_copy_and_drop_keeps_the_chats_rows(pg_url):
    """PgSearch.holds is False (no copy beside the chat's rows) and drop leaves the chat's searchable rows."""
    db = Database(pg_url)
    await db.open()
    try:
        await migrations.require_current(db)
        chats = PgChats(db)
        opened = await chats.open(KEY)
        await chats.append(opened, [Message("user", "the lighthouse keeper", ts=1.0, sender_id="a", sender_name="A")])
        search = PgSearch(db)
        assert search.holds(KEY) is False
        assert await search.drop(KEY) is None
        async with db.connection() as conn:
            count = (await (await conn.execute(
                "SELECT count(*) FROM search_docs d JOIN chats c ON c.id = d.chat WHERE c.channel = %s"
                " AND c.chat_id = %s", (KEY.channel, KEY.chat_id))).fetchone())[0]
        assert count == 1
    finally:
        await db.close()
