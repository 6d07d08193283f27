"""What is read out of a reply: its words, not its Markdown.

    spoken(reply, max_chars, language) -> Spoken(text, cut)

The reply's Markdown is parsed (markdown-it-py, the parser rich already brings) and walked block by block:
emphasis, headings and list marks are dropped (a heading or an item ends as a sentence, so the voice
pauses there); a code block, a table or an image is named rather than read ("(code)", "(a table)",
"(an image)"), as is a link written as a long URL ("(a link)"; a link's own words are read); inline code
is read when it is short, else named; emoji and other pictographs are left out. The names are in the
reply's language where Tusk knows the words (language.py detects it), else in English.

A reply longer than `max_chars` is spoken up to the last sentence end within it (or the last word, if one
sentence runs past it), then "The rest is in the text." (in the reply's language) within the same
`max_chars`; the rest is only in the text shown beside the voice, and `cut` says so.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from markdown_it import MarkdownIt
from markdown_it.token import Token

LONG_URL = 30  # a URL longer than this is named, not read
SHORT_CODE = 40  # inline code up to this long is read as written
URL = re.compile(r"\b(?:https?://|www\.)[^\s<>()]+[^\s<>().,;:!?'\"]", re.IGNORECASE)
SENTENCE_END = re.compile(r"[.!?…。！？](?:[\"'’”)\]]*)(?=\s|$)")
SPACES = re.compile(r"[ \t]+")

# What is named instead of read, per language (ISO 639-1). English is the fallback.
NAMES: dict[str, dict[str, str]] = {
    "en": {"code": "(code)", "table": "(a table)", "link": "(a link)", "image": "(an image)",
           "more": "The rest is in the text."},
    "de": {"code": "(Code)", "table": "(eine Tabelle)", "link": "(ein Link)", "image": "(ein Bild)",
           "more": "Der Rest steht im Text."},
    "fr": {"code": "(du code)", "table": "(un tableau)", "link": "(un lien)", "image": "(une image)",
           "more": "La suite est dans le texte."},
    "es": {"code": "(código)", "table": "(una tabla)", "link": "(un enlace)", "image": "(una imagen)",
           "more": "El resto está en el texto."},
    "it": {"code": "(codice)", "table": "(una tabella)", "link": "(un link)", "image": "(un'immagine)",
           "more": "Il resto è nel testo."},
    "pt": {"code": "(código)", "table": "(uma tabela)", "link": "(um link)", "image": "(uma imagem)",
           "more": "O resto está no texto."},
    "nl": {"code": "(code)", "table": "(een tabel)", "link": "(een link)", "image": "(een afbeelding)",
           "more": "De rest staat in de tekst."},
    "pl": {"code": "(kod)", "table": "(tabela)", "link": "(link)", "image": "(obraz)",
           "more": "Reszta jest w tekście."},
    "ru": {"code": "(код)", "table": "(таблица)", "link": "(ссылка)", "image": "(изображение)",
           "more": "Остальное в тексте."},
    "uk": {"code": "(код)", "table": "(таблиця)", "link": "(посилання)", "image": "(зображення)",
           "more": "Решта в тексті."},
}

_parser = MarkdownIt("commonmark").enable(["table", "strikethrough"])


@dataclass(frozen=True, slots=True)
class Spoken:
    """The words to synthesise, and whether the reply went on past them (the rest is in the text only)."""

    text: str
    cut: bool = False


def names(language: str | None) -> dict[str, str]:
    return NAMES.get((language or "en").split("-")[0].lower(), NAMES["en"])


def spoken(reply: str, max_chars: int, language: str | None = None) -> Spoken:
    """The words of `reply` to read out, at most `max_chars` long, ending at a sentence end where it was cut."""
    said = names(language)
    words = readable(reply, said)
    if len(words) <= max_chars:
        return Spoken(words)
    more = said["more"]
    return Spoken(f"{cut_at_sentence(words, max(1, max_chars - len(more) - 1))} {more}", cut=True)


def readable(markdown: str, said: dict[str, str]) -> str:
    """The Markdown's words as sentences: one block per line, named what is not read."""
    blocks: list[str] = []
    tokens = _parser.parse(markdown)
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token.type in ("fence", "code_block"):
            blocks.append(said["code"])
        elif token.type == "table_open":
            blocks.append(said["table"])
            i = _after(tokens, i, "table_close")
        elif token.type == "html_block":
            pass
        elif token.type == "inline":
            text = _clean(_inline(token.children or [], said))
            if text:
                blocks.append(_ended(text))  # a heading, an item, a paragraph: the voice pauses after it
        i += 1
    return _clean(" ".join(blocks))


def _after(tokens: list[Token], i: int, closing: str) -> int:
    while i < len(tokens) and tokens[i].type != closing:
        i += 1
    return i


def _ended(text: str) -> str:
    return text if text.rstrip("\"'’”)]")[-1:] in tuple(".!?:;…。！？") else text + "."


def _inline(children: list[Token], said: dict[str, str]) -> str:
    out: list[str] = []
    skip_link_text = False
    for child in children:
        kind = child.type
        if kind == "link_open":
            href = str(child.attrs.get("href", ""))
            skip_link_text = False
            label = _link_label(children, child)
            if label is not None and (label == href or URL.fullmatch(label)):  # an autolink: its text is the URL
                out.append(said["link"] if len(label) > LONG_URL else label)
                skip_link_text = True
        elif kind == "link_close":
            skip_link_text = False
        elif skip_link_text:
            continue
        elif kind == "text":
            out.append(_urls_named(child.content, said))
        elif kind == "code_inline":
            out.append(child.content if len(child.content) <= SHORT_CODE else said["code"])
        elif kind in ("softbreak", "hardbreak"):
            out.append(" ")
        elif kind == "image":
            out.append(child.content or said["image"])
        # emphasis, strikethrough and inline HTML marks: dropped, their text (if any) comes as text tokens
    return "".join(out).strip()


def _link_label(children: list[Token], opening: Token) -> str | None:
    """The plain text between a link's opening and closing marks, when it is one text token."""
    at = children.index(opening)
    inner = children[at + 1:at + 2]
    if len(inner) == 1 and inner[0].type == "text" and at + 2 < len(children) and children[at + 2].type == "link_close":
        return inner[0].content
    return None


def _urls_named(text: str, said: dict[str, str]) -> str:
    return URL.sub(lambda m: said["link"] if len(m[0]) > LONG_URL else m[0], text)


def _clean(text: str) -> str:
    """Without pictographs (emoji, dingbats) and control characters; spaces made single."""
    kept = "".join(ch for ch in text if unicodedata.category(ch) not in ("So", "Cs", "Co", "Cc", "Cf")
                   or ch in "\n")
    return SPACES.sub(" ", kept.replace("\n", " ")).strip()


def cut_at_sentence(text: str, max_chars: int) -> str:
    """`text` up to its last sentence end within `max_chars`; without one, up to its last word there."""
    head = text[:max_chars + 1]
    ends = [m.end() for m in SENTENCE_END.finditer(head) if m.end() <= max_chars]
    if ends and ends[-1] >= max_chars // 4:  # a sentence end too early would drop most of what fits
        return text[:ends[-1]].strip()
    space = head.rfind(" ", 0, max_chars + 1)
    return (text[:space] if space > 0 else text[:max_chars]).rstrip(" ,;:-") + "…"
