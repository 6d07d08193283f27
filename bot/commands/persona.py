"""/persona: this chat's own persona (memory/persona.py), shown, set or removed.

    /persona           what it is now (or that there is none)
    /persona <text>    set it (capped in tokens, TUSK_PERSONA_MAX_TOKENS); in a group, admins only
    /persona reset     remove it

It goes into the system prompt under the owner's SOUL.md/AGENTS.md, as this chat's instructions
(bot/context.py): the owner's rules win where they differ.
"""

from __future__ import annotations

from bot.commands.base import ADMINS_ONLY, Command, CommandContext
from memory import persona


def persona_command(max_tokens: int = persona.DEFAULT_MAX_TOKENS) -> Command:
    async def run(ctx: CommandContext, args: str) -> str:
        text = args.strip()
        if not text:
            current = ctx.chat.persona
            if not current:
                return ("This chat has no persona: I answer as the owner set me up. Set one with "
                        "/persona <how I should sound and behave here>.")
            return f"This chat's persona:\n\n{current}\n\n/persona reset removes it."
        if not ctx.may_erase:
            return ADMINS_ONLY.format(what="change this chat's persona")
        if text.lower() == "reset":
            if not ctx.chat.persona:
                return "This chat has no persona to remove."
            await ctx.chats.put_persona(ctx.chat, None)
            return "Persona removed: I answer as the owner set me up."
        try:
            kept, tokens = persona.checked(text, max_tokens)
        except persona.PersonaTooLong as exc:
            return str(exc)
        await ctx.chats.put_persona(ctx.chat, kept)
        return f"Persona set ({tokens:,} tokens). It applies from the next message; /persona shows it."

    return Command("persona", "this chat's persona; '/persona <text>' sets it, '/persona reset' removes it", run)
