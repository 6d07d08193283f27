"""Slack's `rich_text` blocks (what the message composer sends) as Slack markup, for messages whose
`text` is empty: `from_slack` then reads it like any message text.

    rich_text([{"type": "rich_text", "elements": [{"type": "rich_text_section", "elements": [
        {"type": "text", "text": "hi "}, {"type": "user", "user_id": "U1"}, {"type": "emoji", "name": "wave"}]}]}])
    -> "hi <@U1>:wave:"

Sections run on, lists become `•` / `1.` lines, quotes `>` lines, preformatted text a ``` block.
Mentions and links become Slack's `<@U…>`, `<#C…>`, `<!here>`, `<url|label>`; emoji stay
shortcodes; text is escaped as Slack escapes `text`. Anything unknown or malformed is skipped.
"""

from __future__ import annotations

from typing import Any

from channels.slack.format import escape


def _inline(element: Any) -> str:
    if not isinstance(element, dict):
        return ""
    kind = element.get("type")
    if kind == "text":
        text = escape(str(element.get("text") or ""))
        return f"`{text}`" if (element.get("style") or {}).get("code") else text
    if kind == "link":
        url, label = str(element.get("url") or ""), str(element.get("text") or "")
        return f"<{url}|{escape(label)}>" if label else f"<{url}>"
    if kind == "user":
        return f"<@{element.get('user_id', '')}>"
    if kind == "channel":
        return f"<#{element.get('channel_id', '')}>"
    if kind == "usergroup":
        return f"<!subteam^{element.get('usergroup_id', '')}>"
    if kind == "broadcast":
        return f"<!{element.get('range', 'here')}>"
    if kind == "emoji":
        tone = element.get("skin_tone")
        return f":{element.get('name', '')}:" + (f":skin-tone-{tone}:" if tone else "")
    if kind == "date":
        return escape(str(element.get("fallback") or element.get("timestamp") or ""))
    return ""


def _section(element: dict[str, Any]) -> str:
    parts = element.get("elements")
    return "".join(_inline(e) for e in parts) if isinstance(parts, list) else ""


def _object(element: Any) -> list[str]:
    """The lines one rich text object (section, list, quote, preformatted) reads as."""
    if not isinstance(element, dict):
        return []
    kind = element.get("type")
    if kind == "rich_text_list":
        ordered, indent = element.get("style") == "ordered", "  " * int(element.get("indent") or 0)
        items = [e for e in element.get("elements") or [] if isinstance(e, dict)]
        return [f"{indent}{f'{i}.' if ordered else '•'} {_section(item)}" for i, item in enumerate(items, 1)]
    if kind == "rich_text_quote":
        return ["> " + line for line in _section(element).rstrip("\n").split("\n")]
    if kind == "rich_text_preformatted":
        return ["```", *_section(element).rstrip("\n").split("\n"), "```"]
    if kind == "rich_text_section":  # the composer ends a section before a list or quote with a newline
        return _section(element).rstrip("\n").split("\n")
    return []


def rich_text(blocks: Any) -> str:
    """The text a message's `rich_text` blocks carry, as Slack markup ("" when they carry none)."""
    if not isinstance(blocks, list):
        return ""
    lines: list[str] = []
    for block in blocks:
        if isinstance(block, dict) and block.get("type") == "rich_text" and isinstance(block.get("elements"), list):
            for element in block["elements"]:
                lines.extend(_object(element))
    return "\n".join(lines).strip()
