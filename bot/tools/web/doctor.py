"""`tusk doctor`'s web checks: what web_fetch may reach, and one tiny query to the chosen search backend."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.errors import ConfigError
from bot.ops.check import Check

if TYPE_CHECKING:
    from bot.config import Settings

FIXES = {"searxng": "check TUSK_SEARXNG_URL, that SearXNG is up and that `json` is in search.formats of its "
                    "settings.yml",
         "brave": "check TUSK_BRAVE_API_KEY and the plan at api-dashboard.search.brave.com",
         "tavily": "check TUSK_TAVILY_API_KEY and the plan at app.tavily.com",
         "keyless": "pip install ddgs in Tusk's venv; the keyless engines also throttle: try later or pick a backend"}


async def web_checks(settings: Settings) -> list[Check]:
    try:
        web = settings.web_settings()
    except ConfigError as exc:
        return [Check("web", "fail", str(exc), "fix the TUSK_WEB_* settings")]
    allowed = ", ".join(f"{h}:{p}" if p else h for h, p in sorted(web.allow, key=str)) or "none"
    fetch = "on" if web.fetch else "off"
    checks = [Check("web", "ok", f"web_fetch {fetch}; web_search {web.search}; hosts allowed inside: {allowed}; "
                    f"chats: {', '.join(web.chats)}{'' if web.groups else ' (not groups)'}")]
    if web.search != "off":
        from bot.tools.web.search import WebSearch

        verdict, detail = await WebSearch(web).probe()
        fix = FIXES[web.search] if verdict != "ok" else ""
        checks.append(Check(f"web search ({web.search})", verdict, detail, fix))
    return checks
