"""The console's reminders and schedules (bot/schedules/): listed with their runs, paused, resumed, cancelled,
through the running Tusk's own `Schedules` (the same calls /reminders makes).

    GET    /api/schedules?channel=&chat_id=     every chat's (or one chat's) reminders, schedules and check-ins,
                                                times in each chat's zone, runs newest first
    POST   /api/schedules/{id}/pause            a repeating schedule stops running until resumed
    POST   /api/schedules/{id}/resume           it runs again from its next time after now
    DELETE /api/schedules/{id}                  cancelled (removed from reminders.json)
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from bot.schedules.model import Schedule
from bot.schedules.service import Schedules
from bot.schedules.show import row
from memory.chat_settings import ChatSettings


def schedule_routes(schedules: Schedules) -> list[web.RouteDef]:
    def shown(s: Schedule) -> dict[str, Any]:
        return row(s, schedules.zone(schedules.chats.prefs_now(s.key) or ChatSettings()))

    def found(request: web.Request) -> Schedule:
        s = schedules.get(request.match_info["id"])
        if s is None:
            raise web.HTTPNotFound(text=f"no reminder or schedule {request.match_info['id']!r} (cancelled, or done)")
        return s

    async def listing(request: web.Request) -> web.Response:
        channel, chat = request.query.get("channel"), request.query.get("chat_id")
        mine = [s for s in schedules.all() if (channel is None or s.key.channel == channel)
                and (chat is None or s.key.chat_id == chat)]
        mine.sort(key=lambda s: (s.key, s.kind == "checkin", s.paused, s.due.timestamp() if s.due else float("inf")))
        return web.json_response({"schedules": [shown(s) for s in mine]})

    async def pause(request: web.Request) -> web.Response:
        s = found(request)
        if not s.repeating:
            raise web.HTTPConflict(text=f"{s.id} runs once: it cannot be paused, only cancelled")
        return web.json_response(shown(schedules.pause(s) if not s.paused else s))

    async def resume(request: web.Request) -> web.Response:
        s = found(request)
        if not s.repeating:
            raise web.HTTPConflict(text=f"{s.id} runs once: there is nothing to resume")
        return web.json_response(shown(schedules.resume(s) if s.paused else s))

    async def cancel(request: web.Request) -> web.Response:
        s = found(request)
        schedules.cancel(s)
        return web.json_response({"cancelled": s.id})

    return [web.get("/api/schedules", listing), web.post("/api/schedules/{id}/pause", pause),
            web.post("/api/schedules/{id}/resume", resume), web.delete("/api/schedules/{id}", cancel)]
