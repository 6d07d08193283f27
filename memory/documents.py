"""The text Tusk read from documents, kept per chat so `search_history` finds it later: one JSON record per
document under its id, kept by the store (store/base.py; the files backend's `documents/<id>.json`):

        {"schema": 1, "name": "report.pdf", "source": "file", "url": null, "what": "PDF, 12 pages",
         "ts": 1764680000.0, "sender_id": "7", "sender_name": "Ann", "chars": 41233, "cut": false,
         "text": "--- page 1 ---\n..."}

Written when a document's text is read for a turn: a file sent in the chat (a PDF or a text file:
bot/media/reader.py) or a page `web_fetch` read (bot/tools/web/fetch.py, `source` "web" with its
`url`). `<id>` comes from the sender and the text, so the same document from the same person is kept
once (its date refreshed). Caps (`DocumentLimits`): one document's text is cut at `max_chars`
(TUSK_DOCUMENT_INDEX_MAX_CHARS, 0: nothing is kept), and a chat keeps at most `chat_max_chars`
(TUSK_DOCUMENT_INDEX_CHAT_MAX_CHARS) of them all: the oldest go first. The chat's search index
(memory/search_index.py) follows this folder, so a rebuilt index has them again; /forget deletes the
folder, /forget me the sender's documents.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal, Protocol

logger = logging.getLogger(__name__)

SCHEMA = 1
Source = Literal["file", "web"]


@dataclass(frozen=True, slots=True)
class DocumentLimits:
    max_chars: int = 200_000  # TUSK_DOCUMENT_INDEX_MAX_CHARS: one document's text kept (0: none)
    chat_max_chars: int = 2_000_000  # TUSK_DOCUMENT_INDEX_CHAT_MAX_CHARS: all of a chat's documents

    @property
    def on(self) -> bool:
        return self.max_chars > 0 and self.chat_max_chars > 0


@dataclass(frozen=True, slots=True)
class KeptDocument:
    name: str  # the file name as sent, or the page's title (else its URL)
    source: Source
    text: str
    ts: float = field(default_factory=time.time)
    sender_id: str = ""  # who sent the file, or whose turn read the page
    sender_name: str = ""
    url: str | None = None
    what: str = ""  # "PDF, 12 pages", "text", "web page"
    cut: bool = False  # the text was cut at the per-document cap
    id: str = field(default="", compare=False)  # under which it is kept (set when read back)

    def record(self) -> str:
        return json.dumps({"schema": SCHEMA, "name": self.name, "source": self.source, "url": self.url,
                           "what": self.what, "ts": self.ts, "sender_id": self.sender_id,
                           "sender_name": self.sender_name, "chars": len(self.text), "cut": self.cut,
                           "text": self.text}, ensure_ascii=False)


class Kept(Protocol):
    """Where a chat's documents are kept (a ChatHandle of store/base.py)."""

    async def documents(self) -> dict[str, str]: ...

    async def keep_document(self, doc_id: str, record: str) -> None: ...

    async def drop_documents(self, doc_ids: Sequence[str]) -> int: ...


def doc_id(doc: KeptDocument) -> str:
    """The same document from the same person is kept once."""
    return hashlib.sha256(f"{doc.sender_id}\0{doc.source}\0{doc.text}".encode()).hexdigest()[:24]


def parse(key: str, text: str) -> KeptDocument | None:
    """The document kept under `key`; None (logged) if the record is not one."""
    try:
        rec = json.loads(text)
        if not isinstance(rec, dict) or rec.get("schema") != SCHEMA or not isinstance(rec.get("text"), str):
            raise ValueError("not a kept document")
        source: Source = "web" if rec.get("source") == "web" else "file"
        return KeptDocument(str(rec.get("name") or key), source, rec["text"], float(rec.get("ts") or 0),
                            str(rec.get("sender_id") or ""), str(rec.get("sender_name") or ""),
                            rec.get("url") if isinstance(rec.get("url"), str) else None, str(rec.get("what") or ""),
                            bool(rec.get("cut")), key)
    except (ValueError, TypeError) as exc:
        logger.warning("document %s is not a kept document (%s): skipped", key, exc)
        return None


async def kept(where: Kept) -> list[KeptDocument]:
    """The chat's kept documents, oldest first."""
    docs = [doc for key, text in (await where.documents()).items() if (doc := parse(key, text)) is not None]
    return sorted(docs, key=lambda d: (d.ts, d.id))


async def of_sender(where: Kept, sender_id: str) -> list[KeptDocument]:
    """The documents `sender_id` sent (or had read) in this chat."""
    return [doc for doc in await kept(where) if doc.sender_id == sender_id]


async def keep(where: Kept, doc: KeptDocument, limits: DocumentLimits) -> str | None:
    """Keep `doc`'s text for search (cut to the cap), then hold the chat to its cap; its id, or None when
    documents are not kept or it has no text."""
    if not limits.on or not doc.text.strip():
        return None
    if len(doc.text) > limits.max_chars:
        doc = replace(doc, text=doc.text[:limits.max_chars], cut=True)
    key = doc_id(doc)
    await where.keep_document(key, doc.record())
    await _hold_to_cap(where, limits.chat_max_chars, key)
    return key


async def _hold_to_cap(where: Kept, chat_max_chars: int, newest: str) -> None:
    """Remove the oldest documents (never `newest`) while the chat's texts are over `chat_max_chars`."""
    docs = await kept(where)
    total = sum(len(d.text) for d in docs)
    drop = []
    for doc in docs:
        if total <= chat_max_chars:
            break
        if doc.id == newest:
            continue
        drop.append(doc.id)
        total -= len(doc.text)
        logger.info("documents over their cap: the text of %s (%s) is no longer kept for search", doc.id,
                    time.strftime("%Y-%m-%d", time.gmtime(doc.ts)))
    if drop:
        await where.drop_documents(drop)
