"""Tusk's own words as every channel's user must see them (issue 38): the answers to `/memory why tea` and
`/persona` in a chat whose MEMORY.md holds five facts, of which 3 and 5 are about tea.

    seed(files)            write that MEMORY.md into a chat's folder
    WHY, WHY_ANSWER        the command and its answer, exactly as written: facts 3 and 5 (never renumbered
                           3 and 4), each with its source line under it after a single line break, and
                           `*strong*` with its asterisks
    PERSONA, PERSONA_ANSWER  the command and its answer, with its `<how I should sound ...>` placeholder

A channel test sends both commands through its platform's fake and asserts that what the user is shown
equals the answer, character for character.
"""

from __future__ import annotations

from memory.paths import ChatFiles

MEMORY = ("## Ann\n\n- Ann has a cat called Miso\n- Ann works nights\n- Ann drinks *strong* green tea\n"
          "- Ann lives in Lyon\n- Ann buys her tea at the market\n")
UNKNOWN = "  (no record of where this came from: it predates the links, or its sources were erased)"
WHY = "/memory why tea"
WHY_ANSWER = (f"3. Ann drinks *strong* green tea (under Ann)\n{UNKNOWN}\n\n"
              f"5. Ann buys her tea at the market (under Ann)\n{UNKNOWN}")
PERSONA = "/persona"
PERSONA_ANSWER = ("This chat has no persona: I answer as the owner set me up. "
                  "Set one with /persona <how I should sound and behave here>.")
ANSWERS = (WHY_ANSWER, PERSONA_ANSWER)


def seed(files: ChatFiles) -> None:
    """The chat's MEMORY.md: five facts under `## Ann`, the third and the fifth about tea."""
    files.ensure()
    files.memory.write_text(MEMORY)
