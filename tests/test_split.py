"""Long replies split into platform-sized pieces at readable boundaries, code fences balanced."""

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from channels.split import _open_fence, split_message, utf16_len


def squash(text: str) -> str:
    """The text without whitespace and fences (a split adds some), for comparing content.
    The generated texts use the letters j and s only in the fence "```js"."""
    return re.sub(r"\s+|`|j|s", "", text)


def fences_balanced(piece: str) -> bool:
    """No code block left open at the end (a fence line with a language never closes one)."""
    return _open_fence(piece) == ("", "")


def test_short_text_is_one_piece():
    """A reply within the limit is sent as it is."""
    assert split_message("  hello\n\nworld  ", 100) == ["hello\n\nworld"]


def test_cuts_at_paragraphs_before_lines_before_words():
    """The cut falls at a blank line when one is in reach, else a line break, else a space."""
    para = "word " * 30
    assert split_message(f"{para}\n\n{para}", 200) == [para.strip(), para.strip()]
    lines = "\n".join(["line of text"] * 30)
    assert all(p.endswith("line of text") for p in split_message(lines, 100))
    assert all(not p.startswith(" ") and not p.endswith(" ") for p in split_message("abc " * 100, 50))


def test_code_block_is_closed_and_reopened():
    """A piece that ends inside a code block closes it; the next reopens it with the same language."""
    code = "```python\n" + "\n".join(f"    x{i} = {i}" for i in range(200)) + "\n```\nafter"
    pieces = split_message(code, 500)
    assert len(pieces) > 3
    assert all(fences_balanced(p) for p in pieces)
    assert all(p.startswith("```python\n") for p in pieces[:-1])
    assert "\n    x150 = 150" in "".join(pieces)  # indentation inside code survives the cut


def test_measure_is_what_counts():
    """Pieces are sized by the platform's measure (here: every '&' becomes '&amp;')."""
    text = "&" * 1000
    pieces = split_message(text, 400, measure=lambda p: len(p.replace("&", "&amp;")))
    assert all(len(p) * 5 <= 400 for p in pieces) and "".join(pieces) == text


def test_utf16_len_counts_astral_characters_twice():
    """Telegram and Slack count UTF-16 code units: an emoji outside the BMP is two."""
    assert utf16_len("a😀") == 3


words = st.text(alphabet="ab &<*_`\n", min_size=0, max_size=12)
blocks = st.lists(st.one_of(words, st.just("\n```js\n"), st.just("\n```\n"), st.just("\n\n")), max_size=120)


@settings(max_examples=200, deadline=None)
@given(parts=blocks, limit=st.integers(min_value=40, max_value=300))
def test_any_text_splits_within_limit_without_losing_content(parts, limit):
    """Every piece is within the limit, balanced if the text is, and (fences and whitespace aside) holds the text."""
    text = " ".join(parts)
    pieces = split_message(text, limit)
    assert all(len(p) <= limit and p.strip() == p and p for p in pieces)
    assert squash("".join(pieces)) == squash(text)
    if fences_balanced(text):
        assert all(fences_balanced(p) for p in pieces)
