"""A kept document's text as search indexes it: passages of about `PASSAGE_CHARS` characters, each with its page.

    passages(text) -> [(page, passage), ...]      page 0: the text before any page marker (or no pages at all)

Pages are the markers bot/media/documents.py and web PDFs write (`--- page 3 ---`, `[page 3]`); within a
page, passages are cut at paragraph breaks, and a paragraph longer than a passage at a space. Both
backends' indexes (memory/search_index.py, store/postgres/indexing.py) cut documents so, so a search
finds the same passages on either.
"""

from __future__ import annotations

import re

PASSAGE_CHARS = 1200  # a document is indexed in passages of about this many characters
PAGE = re.compile(r"^(?:--- page (\d+) ---|\[page (\d+)\])$", re.MULTILINE)  # bot/media/documents.py, web PDFs


def passages(text: str, size: int = PASSAGE_CHARS) -> list[tuple[int, str]]:
    """(page, passage) of a document's text: its pages (the markers bot/media/documents.py and web PDFs
    write), each in passages of about `size` characters cut at paragraph breaks, else at a space."""
    marks = list(PAGE.finditer(text))
    pages = [(0, text[:marks[0].start()] if marks else text)]
    for mark, after in zip(marks, [*marks[1:], None]):
        pages.append((int(mark[1] or mark[2]), text[mark.end():after.start() if after else len(text)]))
    out = []
    for page, body in pages:
        chunk = ""
        for para in (p.strip() for p in body.split("\n\n")):
            while len(para) > size:  # one paragraph longer than a passage: cut at a space
                at = para.rfind(" ", size // 2, size)
                at = at if at > 0 else size
                if chunk:
                    out.append((page, chunk))
                    chunk = ""
                out.append((page, para[:at].strip()))
                para = para[at:].strip()
            if chunk and len(chunk) + len(para) + 2 > size:
                out.append((page, chunk))
                chunk = ""
            chunk = f"{chunk}\n\n{para}" if chunk and para else chunk or para
        if chunk.strip():
            out.append((page, chunk))
    return out
