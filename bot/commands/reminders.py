"""/reminders and /checkins: a chat's reminders, schedules and check-ins, answered by Tusk itself.

    /reminders                       each with its time, or its rule and next run, and a schedule's last run
    /reminders <id>                  one, with its recorded runs (delivered, failed and why)
    /reminders pause|resume|cancel <id>
    /checkins [on | off]             ask about the chat's dated open items the day after (off by default;
                                     in a group only an admin switches it); alone: whether it is on, and
                                     the check-ins to come
"""

from __future__ import annotations

from dataclasses import replace

from bot.commands.base import ADMINS_ONLY, Command, CommandContext
from bot.schedules.checkins import CheckIns
from bot.schedules.service import Schedules
from bot.schedules.show import details, listing, show, when
from memory import open_items

USE = "Use /reminders to list them, /reminders <id> for one's runs, /reminders pause|resume|cancel <id>."


def reminder_commands(schedules: Schedules, checkins: CheckIns) -> list[Command]:
    async def reminders(ctx: CommandContext, args: str) -> str:
        zone = schedules.zone(ctx.prefs)
        words = args.split()
        if not words:
            return listing(schedules.of(ctx.key), zone)
        if len(words) > 2 or (len(words) == 2 and words[0].lower() not in ("pause", "resume", "cancel")):
            return USE
        try:
            s = schedules.mine(ctx.key, words[-1])
        except ValueError:
            return f"There is no reminder {words[-1]} in this chat.\n\n" + listing(schedules.of(ctx.key), zone)
        if len(words) == 1:
            return details(s, zone)
        verb = words[0].lower()
        if verb == "cancel":
            schedules.cancel(s)
            return f"Cancelled {s.id}: {when(s, zone)} — {s.text}"
        if not s.repeating:
            return f"{s.id} is a one-time reminder: it cannot be paused; /reminders cancel {s.id} removes it."
        if verb == "pause":
            if s.paused:
                return f"{s.id} is already paused; /reminders resume {s.id} starts it again."
            schedules.pause(s)
            return f"Paused {s.id} ({s.rule.text if s.rule else ''}): it does not run until /reminders resume {s.id}."
        if not s.paused:
            return f"{s.id} is not paused: it runs next {show(s.due, zone) if s.due else 'never'}."
        s = schedules.resume(s)
        return f"Resumed {s.id}: {when(s, zone)} — {s.text}"

    async def checkins_command(ctx: CommandContext, args: str) -> str:
        current = ctx.prefs
        word = args.strip().lower()
        if word not in ("", "on", "off"):
            return "Use /checkins on or /checkins off."
        if word and not ctx.may_erase:
            return ADMINS_ONLY.format(what="switch check-ins")
        if word == "on":
            if not current.checkins:
                await ctx.chats.put_settings(ctx.chat, replace(current, checkins=True))
            added = checkins.plan(ctx.chat)
            return (f"Check-ins: on. When the conversation is summarised I note dated plans in memory under "
                    f"\"{open_items.HEADING}\" (/memory shows them; /memory forget removes one), and the day after "
                    f"each I ask once how it went, at most {schedules.settings.checkins_daily} a day, never at "
                    f"night. /checkins off stops it." + (f" {added} check-in(s) planned." if added else ""))
        if word == "off":
            if current.checkins:
                await ctx.chats.put_settings(ctx.chat, replace(current, checkins=False))
            cancelled = checkins.turned_off(ctx.key)
            return "Check-ins: off." + (f" {cancelled} planned check-in(s) cancelled." if cancelled else "")
        zone = schedules.zone(ctx.prefs)
        state = "on" if current.checkins else "off (/checkins on to start)"
        coming = [s for s in schedules.of(ctx.key, checkins=True) if s.due is not None]
        lines = [f"Check-ins: {state}."]
        if current.checkins:
            items = open_items.items(ctx.chat.memory.text)
            lines.append(f"Open items in memory: {len(items)}.")
        lines += [f"- {s.id}: {show(s.due, zone)} — {s.item}" for s in coming if s.due is not None]
        return "\n".join(lines)

    return [Command("reminders", "this chat's reminders and schedules; '/reminders pause|resume|cancel <id>'",
                    reminders),
            Command("checkins", "'/checkins on': I ask about the plans you mention, the day after", checkins_command)]
