"""Text across the Slack boundary: the model's Markdown out as mrkdwn, Slack's markup in as plain text.

    to_mrkdwn("**Hi** [docs](https://x.io)")   -> "*Hi* <https://x.io|docs>"
    split_for_slack(markdown)                  -> ["mrkdwn piece", ...] each <= 3,000 characters
    split_for_slack(text, verbatim=True)       -> Tusk's own words, escaped, every line as written
    from_slack("<@UBOT> see <https://x.io|x.io> &amp; more", bot_user_id="UBOT") -> "see x.io & more"
    name_mentions("ask <@U1> and <@U2|bob>", {"U1": "ann"})                  -> "ask @ann and @bob"

mrkdwn has bold `*b*`, italic `_i_`, strike `~s~`, code spans and ``` blocks (no language
tag), `>` quotes and `<url|label>` links, and no headings, lists or tables: headings become
bold lines, bullets `•`. `&`, `<` and `>` are escaped everywhere, code included, so text
can never form a link or a broadcast: only user and channel mentions (`<@U…>`, `<#C…>`)
the model writes are kept; `<!here>`/`<!channel>` arrive escaped and notify nobody.

Tusk's own words (`OutboundMessage.verbatim`: a command's answer, a pairing code) are not converted:
only `&`, `<` and `>` are escaped, so `<persona>` shows, and every line stays as written (mrkdwn has
no lists to renumber); they are posted with `mrkdwn: false` where Slack takes it, so `*` and `_` stay too.
"""

from __future__ import annotations

import re

from channels.split import FENCE, split_message

LIMIT = 3000  # characters per message: Slack allows far more, but readers scroll past walls of text

_SENTINEL = "\x00"
_BOLD = "\x01"
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
_MENTION = re.compile(r"<([@#][UWCG][A-Z0-9]+(?:\|[^<>|]*)?)>")
_AUTOLINK = re.compile(r"<((?:https?|mailto):[^<>\s|]+)>")
_LINK = re.compile(r"(!?)\[([^\]\n]*)\]\(\s*<?([^()\s<>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HEADING = re.compile(r"^ {0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$")
_RULE = re.compile(r"^ {0,3}([-*_])(?:\s*\1){2,}\s*$")
_QUOTE = re.compile(r"^ {0,3}(?:>\s?)+(.*)$")
_BULLET = re.compile(r"^(\s*)[-*+]\s+(?:\[([ xX])\]\s+)?(.*)$")
_BOLD_ITALIC = re.compile(r"\*\*\*(?=\S)(.+?)(?<=\S)\*\*\*")
_STRONG = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*|(?<!\w)__(?=\S)(.+?)(?<=\S)__(?!\w)")
_EM = re.compile(r"(?<![\w*])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![\w*])")
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_INCOMING = re.compile(r"<([^<>]+)>")
_USER = re.compile(r"<@([UW][A-Z0-9]+)(?:\|([^<>]*))?>")


def escape(text: str) -> str:
    """The three characters Slack wants escaped in message text."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _blocks(markdown: str) -> list[tuple[bool, list[str]]]:
    """The text cut into (is_code, lines) runs; a fenced block's lines exclude its fences."""
    runs: list[tuple[bool, list[str]]] = []
    prose: list[str] = []
    code: list[str] | None = None
    marker = ""
    for line in markdown.split("\n"):
        match = FENCE.match(line)
        if code is None and match:
            if prose:
                runs.append((False, prose))
                prose = []
            code, marker = [], match[1]
        elif code is not None and match and line.strip() == match[1] and match[1][0] == marker[0] \
                and len(match[1]) >= len(marker):
            runs.append((True, code))
            code = None
        elif code is not None:
            code.append(line)
        else:
            prose.append(line)
    if code is not None:  # an unclosed block runs to the end, as Markdown renders it
        runs.append((True, code))
    if prose:
        runs.append((False, prose))
    return runs


def _inline(text: str) -> str:
    """One line of prose: code spans, links and mentions kept aside, the rest escaped, then emphasis."""
    kept: list[str] = []

    def keep(piece: str) -> str:
        kept.append(piece)
        return f"{_SENTINEL}{len(kept) - 1}{_SENTINEL}"

    def link(m: re.Match[str]) -> str:
        label, url = m[2].strip(), m[3]
        if not re.match(r"(?:https?|mailto):", url):
            return label or url  # relative or odd links cannot be opened from Slack: keep the words
        label = label.replace("|", "/") or (url if m[1] else "")
        return keep(f"<{escape(url)}|{escape(label)}>" if label else f"<{escape(url)}>")

    text = _CODE_SPAN.sub(lambda m: keep(f"`{escape(m[2])}`"), text.replace(_SENTINEL, ""))
    text = _LINK.sub(link, text)
    text = _AUTOLINK.sub(lambda m: keep(f"<{escape(m[1])}>"), text)
    text = _MENTION.sub(lambda m: keep(m[0]), text)
    text = escape(text)
    text = _BOLD_ITALIC.sub(lambda m: f"{_BOLD}_{m[1]}_{_BOLD}", text)
    text = _STRONG.sub(lambda m: f"{_BOLD}{m[1] or m[2]}{_BOLD}", text)
    text = _EM.sub(r"_\1_", text)
    text = _STRIKE.sub(r"~\1~", text).replace(_BOLD, "*")
    return re.sub(f"{_SENTINEL}(\\d+){_SENTINEL}", lambda m: kept[int(m[1])], text)


def _prose_line(line: str) -> str:
    if m := _HEADING.match(line):
        title = _inline(m[1]).replace("*", "")
        return f"*{title}*" if title else ""
    if _RULE.match(line):
        return "──────────"
    if m := _QUOTE.match(line):
        return "> " + _inline(m[1])
    if m := _BULLET.match(line):
        box = {" ": "☐ ", "x": "☑ ", "X": "☑ "}.get(m[2] or "", "")
        return f"{m[1]}• {box}{_inline(m[3])}"
    return _inline(line)


def to_mrkdwn(markdown: str) -> str:
    """Slack mrkdwn for the model's Markdown (see the module docstring for what maps to what)."""
    out: list[str] = []
    for is_code, lines in _blocks(markdown):
        if is_code:
            out.append("```\n" + escape("\n".join(lines)) + "\n```")
        else:
            out.extend(_prose_line(line) for line in lines)
    return "\n".join(out)


def mrkdwn_len(markdown: str) -> int:
    return len(to_mrkdwn(markdown))


def escaped_len(text: str) -> int:
    return len(escape(text))


def split_for_slack(markdown: str, limit: int = LIMIT, verbatim: bool = False) -> list[str]:
    """The reply as mrkdwn messages, each at most `limit` characters once converted, code fences balanced;
    `verbatim` (Tusk's own words): escaped, not converted."""
    if verbatim:
        return [escape(piece) for piece in split_message(markdown, limit, escaped_len, verbatim=True)]
    return [to_mrkdwn(piece) for piece in split_message(markdown, limit, mrkdwn_len)]


def _incoming(m: re.Match[str]) -> str:
    inner = m[1]
    target, _, label = inner.partition("|")
    if target[:1] == "@":
        return m[0]  # a user mention stays as Slack writes it, so the model can mention them back
    if target[:1] == "#":
        return f"#{label}" if label else f"<{target}>"  # Slack now often sends `<#C123|>`: the id, linkable back
    if target[:1] == "!":
        special = target[1:].split("^")[0]
        return label or (f"@{special}" if special in ("here", "channel", "everyone") else "")
    if target.startswith("mailto:"):
        return label or target[len("mailto:"):]
    if not label or label in (target, re.sub(r"^https?://", "", target)):
        return label or target
    return f"{label} ({target})"


def from_slack(text: str, bot_user_id: str | None = None) -> str:
    """Plain text for the model from a Slack message: the bot's own mention dropped, links
    as their label (and address when it differs), `&amp;`/`&lt;`/`&gt;` unescaped."""
    if bot_user_id:
        text = re.sub(rf"<@{re.escape(bot_user_id)}(?:\|[^>]*)?>", "", text)
    text = _INCOMING.sub(_incoming, text)
    text = text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    return re.sub(r"[ \t]{2,}", " ", text).strip()


def unnamed_mentions(text: str) -> list[str]:
    """The ids of user mentions in `text` that carry no name (`<@U123>`), each once, in order."""
    return list(dict.fromkeys(m[1] for m in _USER.finditer(text) if not m[2]))


def name_mentions(text: str, names: dict[str, str]) -> str:
    """User mentions as `@name` the model can read: the name in the mention, else from `names`, else the id."""
    return _USER.sub(lambda m: "@" + (m[2] or names.get(m[1]) or m[1]), text)
