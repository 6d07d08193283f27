"""What commands, tools and the console change in a chat's memory, through the store (store/base.py):
memory/'s pure rules (provenance, tombstones, documents) applied to the chat's documents.

    await edit(handle, text, source)             MEMORY.md replaced (a version kept), its new facts linked
    await forget_facts(handle, chosen, by)       facts out of MEMORY.md, tombstones kept so they stay out
    await links(handle) / await stones(handle)   provenance.json / forgotten.json, read

Callers hold the chat's memory lock (bot/consolidation.py `Consolidator.lock`) around a read-modify-write,
so a consolidation round and a `remember` never lose each other's write; the store's compare-and-set on
the memory version refuses a write that raced anyway.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from memory import provenance, tombstones
from memory.provenance import Fact, Source
from store.base import FORGOTTEN, PROVENANCE, ChatHandle, Memory


async def links(handle: ChatHandle) -> dict[str, dict[str, Any]]:
    return provenance.parse(await handle.doc(PROVENANCE))


async def stones(handle: ChatHandle) -> list[tombstones.Tombstone]:
    return tombstones.parse(await handle.doc(FORGOTTEN))


async def edit(handle: ChatHandle, text: str, source: Source, current: Memory | None = None,
               exact: Callable[[Fact], bool] = lambda fact: True) -> Memory:
    """Replace MEMORY.md with `text` and link its new or changed facts to `source` (memory/provenance.py);
    `current` is the memory the edit was made from (compare-and-set: StaleWrite if it changed since)."""
    before = current or await handle.memory()
    after = await handle.write_memory(text, expect=before.version)
    await handle.put_doc(PROVENANCE, provenance.dump(provenance.after_edit(await links(handle), before.text, text,
                                                                          source, exact)))
    return after


async def forget_facts(handle: ChatHandle, chosen: Sequence[Fact], by: str = "") -> Memory:
    """`chosen` out of MEMORY.md as a new version (so /memory undo brings them back), each kept as a tombstone
    (memory/tombstones.py) so later consolidation cannot bring it back."""
    current = await handle.memory()
    memory, kept = tombstones.forget(current.text, await stones(handle), chosen, by)
    await handle.put_doc(FORGOTTEN, tombstones.dump(kept))
    return await handle.write_memory(memory, expect=current.version)
