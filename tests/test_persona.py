"""/persona: a chat's own persona, in its system prompt only, under the owner's instructions."""

import stat
import tarfile

import pytest

from bot.commands import CommandContext
from bot.commands.persona import persona_command
from bot.events import ChatKey
from bot.ops.admin import export_chat
from memory.paths import ChatFiles
from store import open_files
from store.base import PERSONA
from tests import kept

pytestmark = pytest.mark.both_stores


async def persona(tusk, chat):
    """The chat's PERSONA.md as its store keeps it (None: none)."""
    return await tusk.chats.handle(ChatKey("http", chat)).doc(PERSONA)


def system_of(body):
    return body["messages"][0]["content"]


async def test_persona_changes_what_this_chat_sends_and_no_other(tusk, fake_llm):
    """Set in one chat, the persona reaches that chat's system prompt (after SOUL.md, before the memory, framed
    under the owner's rules) and never another chat's; the prompt is byte-identical from turn to turn."""
    (tusk.settings.home / "SOUL.md").write_text("Always be kind.")
    reply = (await tusk.say("pirate", "/persona Talk like a pirate, briefly."))[0]
    assert reply.startswith("Persona set") and fake_llm.requests == []
    await tusk.say("pirate", "hello")
    await tusk.say("pirate", "again")
    await tusk.say("plain", "hello")
    pirate, again, plain = (system_of(b) for b in fake_llm.requests)
    assert pirate == again
    assert "Talk like a pirate" in pirate and "Talk like a pirate" not in plain
    assert pirate.index("Always be kind.") < pirate.index("Talk like a pirate") < pirate.index("## Memory of this chat")
    assert "the instructions above win" in pirate
    assert await persona(tusk, "pirate") == "Talk like a pirate, briefly.\n"
    if tusk.store.kind == "files":  # a file of the owner's alone
        assert stat.S_IMODE(kept.files(tusk, "http", "pirate").persona.stat().st_mode) == 0o600


async def test_persona_shows_resets_and_caps(make_settings, fake_llm):
    """/persona shows it, /persona reset removes it, and one over TUSK_PERSONA_MAX_TOKENS is refused whole."""
    from tests.conftest import running

    async with running(make_settings(TUSK_PERSONA_MAX_TOKENS=20)) as tusk:
        assert "no persona" in (await tusk.say("p", "/persona"))[0]
        too_long = (await tusk.say("p", "/persona " + "be very very formal " * 20))[0]
        assert "up to 20" in too_long and await persona(tusk, "p") is None
        await tusk.say("p", "/persona Be formal.")
        assert "Be formal." in (await tusk.say("p", "/persona"))[0]
        assert (await tusk.say("p", "/persona reset"))[0].startswith("Persona removed")
        await tusk.say("p", "hi")
    assert "persona" not in system_of(fake_llm.requests[-1]).lower()


async def test_forget_deletes_the_persona_and_export_carries_it(tusk, fake_llm, tmp_path):
    """/forget lists and deletes PERSONA.md; `tusk export` includes it."""
    await tusk.say("f", "/persona Be brief.")
    await tusk.say("f", "hi")
    _, names = await export_chat(tusk.store, ChatKey("http", "f"), tmp_path / "out.tar.gz")
    assert "f/PERSONA.md" in names
    with tarfile.open(tmp_path / "out.tar.gz") as tar:
        assert tar.extractfile("f/PERSONA.md").read() == b"Be brief.\n"
    assert "persona (PERSONA.md)" in (await tusk.say("f", "/forget"))[0]
    report = (await tusk.say("f", "/forget confirm"))[0]
    assert "deleted this chat's persona (PERSONA.md)" in report and await persona(tusk, "f") is None


async def test_in_a_group_only_admins_change_the_persona(tmp_path):
    """A member who is not an admin may read the persona but not set or reset it."""
    chats, key = open_files(tmp_path).chats, ChatKey("telegram", "-100")
    files = ChatFiles.locate(tmp_path, "telegram", "-100")
    ctx = CommandContext(key, await chats.open(key), chats, "m", may_erase=False, is_group=True)
    command = persona_command()
    assert "only its administrators" in await command.fn(ctx, "Be loud.")
    assert not files.persona.exists()
    admin = CommandContext(key, await chats.open(key), chats, "m", may_erase=True, is_group=True)
    assert (await command.fn(admin, "Be loud.")).startswith("Persona set")
    ctx = CommandContext(key, await chats.open(key), chats, "m", may_erase=False, is_group=True)
    assert "Be loud." in await command.fn(ctx, "")
