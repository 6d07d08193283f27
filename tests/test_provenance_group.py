"""/memory why and /memory forget in a group: who said it, and who may forget what (Telegram's fake)."""

from memory import files as memfiles
from tests import kept
from tests.test_group_memory import GROUP, say, tg, tusk  # noqa: F401 - the group's fixtures


async def test_why_in_a_group_names_who_said_it(tusk, tg, fake_llm):
    """A group's fact is shown with the member who said it, quoted and dated, and nobody else's words."""
    await say(tg, 7, "@tusk_bot my drink is mint-tea-7a1")
    await say(tg, 8, "@tusk_bot my drink is espresso-8b2")
    await say(tg, 8, "/new@tusk_bot")
    answer = await say(tg, 9, "/memory@tusk_bot why mint-tea-7a1")
    assert "(under Alice)" in answer and "from what Alice said:" in answer
    assert "\u201cmy drink is mint-tea-7a1\u201d" in answer and "espresso" not in answer


async def test_a_member_forgets_only_their_own_facts_an_admin_any(tusk, tg, fake_llm):
    """A member may forget a fact in their own section, not another's; an admin may forget anyone's."""
    await say(tg, 7, "@tusk_bot my drink is mint-tea-7a1")
    await say(tg, 8, "@tusk_bot my drink is espresso-8b2")
    await say(tg, 8, "/new@tusk_bot")
    files = kept.files(tusk, "telegram", str(GROUP))  # this module's tests run on files
    refused = await say(tg, 7, "/memory@tusk_bot forget all espresso-8b2")
    assert "only its administrators" in refused and "espresso-8b2" in memfiles.read_memory(files)
    assert "Forgotten for good" in await say(tg, 7, "/memory@tusk_bot forget all mint-tea-7a1")
    assert "mint-tea-7a1" not in memfiles.read_memory(files)
    tg.members[(GROUP, 9)] = "administrator"
    assert "Forgotten for good" in await say(tg, 9, "/memory@tusk_bot forget all espresso-8b2")
    assert "espresso-8b2" not in memfiles.read_memory(files)
