"""A reply's text as Discord messages: `pieces(text, verbatim)` cuts it within 2,000 characters
(channels/split.py); Tusk's own words (a command's answer, a pairing code: `OutboundMessage.verbatim`) are
escaped first, so Discord shows them as written.

Discord renders Markdown in every message: headings (`#`, `##`, `###`, `-#`), lists (`-`, `*`, and `1.`,
which Discord numbers from the first item, so facts 3 and 5 would read 3 and 4), quotes (`>`, `>>>`),
emphasis and spoilers (`*`, `_`, `~`, `|`), code (`` ` ``) and masked links. A backslash before such a
character shows the character itself (Discord's "Markdown text 101": escaping). discord.py's
`utils.escape_markdown` escapes all of them but the ordered-list numbers (and puts the backslash before
the indentation of an indented `-` item); both are done here. Links stay as they are, so they still open.

    escaped("3. tea\\n5. *strong* tea")  -> "3\\\\. tea\\n5\\\\. \\\\*strong\\\\* tea"
"""

from __future__ import annotations

import re
import warnings

with warnings.catch_warnings():  # discord.py imports audioop (deprecated since 3.11) for voice, which Tusk never uses
    warnings.filterwarnings("ignore", "'audioop' is deprecated", DeprecationWarning)
    from discord.utils import escape_markdown

from channels.split import split_message

MAX_TEXT = 2000  # characters in a message

_NUMBERED = re.compile(r"^(\s*\d{1,9})([.)])(?=\s|$)", re.MULTILINE)
_INDENTED_DASH = re.compile(r"^\\(\s+)-", re.MULTILINE)


def escaped(text: str) -> str:
    """`text` with everything Discord's Markdown would render escaped: it reads exactly as written."""
    text = _INDENTED_DASH.sub(r"\1\\-", escape_markdown(text))
    return _NUMBERED.sub(r"\1\\\2", text)


def escaped_len(text: str) -> int:
    """The size Discord counts for `text` once escaped (characters)."""
    return len(escaped(text))


def pieces(text: str, verbatim: bool = False) -> list[str]:
    """The messages `text` is sent as: the model's Markdown split with its code fences balanced, or Tusk's own
    words split where they read well, then escaped (each piece within 2,000 characters once escaped)."""
    if not verbatim:
        return split_message(text, MAX_TEXT)
    return [escaped(piece) for piece in split_message(text, MAX_TEXT, escaped_len, verbatim=True)]
