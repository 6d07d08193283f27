"""The web console's view of the skills (mounted by bot/app.py beside the console's routes).

    GET /api/skills    every skill folder found: source, folder, offered or not and why, its chats, the
                       tokens of its line; the roots looked in, TUSK_SKILLS_MAX_TOKENS and the section's size
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from bot.skills.views import as_json

if TYPE_CHECKING:
    from bot.skills.chats import SkillTools


def skill_routes(tools: SkillTools) -> list[web.RouteDef]:
    async def skills(request: web.Request) -> web.Response:
        return web.json_response(as_json(tools.settings, tools.catalog))

    return [web.get("/api/skills", skills)]
