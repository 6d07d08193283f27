"""/model: which model this chat talks to (bot/llm/choice.py).

    /model           this chat's model and the ones it may use (TUSK_MODELS)
    /model <label>   switch this chat to it (in a group: administrators only); kept in settings.json
    /model default   back to TUSK_MODEL
"""

from __future__ import annotations

from dataclasses import replace

from bot.commands.base import ADMINS_ONLY, Command, CommandContext
from bot.llm.choice import ModelChoices


def _listing(choices: ModelChoices) -> str:
    lines = [f"- {label}: {model}" for label, model in choices.choices.items()]
    return "\n".join([f"- default: {choices.default}", *lines])


def model_command(choices: ModelChoices) -> Command:
    async def run(ctx: CommandContext, args: str) -> str:
        word = args.strip()
        label = choices.label_for(ctx.prefs)
        if not word:
            current = f"{label} ({choices.choices[label]})" if label else f"the default ({choices.default})"
            if not choices.choices:
                return (f"This chat uses {choices.default}. The owner lists no other models "
                        "(TUSK_MODELS), so there is nothing to switch to.")
            return f"This chat uses {current}. Models it may use:\n{_listing(choices)}\n\nSwitch with /model <label>."
        if not ctx.may_erase:
            return ADMINS_ONLY.format(what="switch this chat's model")
        if word.lower() == "default":
            await ctx.chats.put_settings(ctx.chat, replace(ctx.prefs, model=None))
            return f"This chat now uses the default model ({choices.default})."
        if word not in choices.choices:
            return f"There is no model {word!r} here. Models this chat may use:\n{_listing(choices)}"
        await ctx.chats.put_settings(ctx.chat, replace(ctx.prefs, model=word))
        return f"This chat now uses {word} ({choices.choices[word]}), from the next message."

    return Command("model", "this chat's model; '/model <label>' switches it", run)
