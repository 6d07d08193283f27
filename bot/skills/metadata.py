"""What other agents' skills ask of the agent that runs them, read from their frontmatter, and what of it Tusk
cannot give.

The Agent Skills format leaves `metadata` to each agent. Two conventions are common among real skills:

    nanobot     metadata: {"nanobot": {"requires": {"bins": [...], "env": [...]}, "always": true, "os": [...]}}
                (and a top-level `always: true`): `always` puts the body in every prompt
    OpenClaw    metadata: {"openclaw": {"requires": {"bins", "anyBins", "env", "config"}, "os": [...],
                "always": true}} (`clawdbot` before it): `always` makes the skill eligible whatever it requires

`metadata` may also be that object written as a JSON string (as nanobot accepts). Tusk runs no programs and
gives none an environment, so a skill that requires a program, an environment variable or another agent's
settings cannot work here and is not offered, with the reason. An `os` list without this system, and
`disable-model-invocation: true` (only a person may start it, and Tusk has no way to), keep a skill out too.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any

AGENTS = ("nanobot", "openclaw", "clawdbot")  # the metadata keys read, in this order
OS_NAMES = {"linux": "Linux", "darwin": "macOS", "win32": "Windows"}


def _object(raw: object) -> dict[str, Any]:
    """`metadata` as a mapping: itself, or parsed from a JSON string; anything else is empty."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return {}
    return {str(k): v for k, v in raw.items()} if isinstance(raw, Mapping) else {}


def extensions(front: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """(agent, its block) for each agent's block found in `metadata`."""
    meta = _object(front.get("metadata"))
    return [(agent, block) for agent in AGENTS if isinstance(block := meta.get(agent), Mapping)]


def _names(value: object) -> list[str]:
    """A list of names as skills write them: a list of strings, or one string; anything else is none."""
    if isinstance(value, str):
        value = [value]
    return [v.strip() for v in value if isinstance(v, str) and v.strip()] if isinstance(value, list) else []


def always(front: Mapping[str, Any]) -> bool:
    """nanobot's `always`: the skill's body goes into every prompt (top-level or under metadata.nanobot)."""
    return front.get("always") is True or any(agent == "nanobot" and block.get("always") is True
                                               for agent, block in extensions(front))


def unmet(front: Mapping[str, Any], platform: str = sys.platform) -> tuple[str, ...]:
    """Why Tusk cannot offer this skill, a sentence each; empty when it can."""
    reasons: list[str] = []
    if front.get("disable-model-invocation") is True:
        reasons.append("disable-model-invocation is true: only a person may start it, and Tusk has no way to")
    for agent, block in extensions(front):
        where = f"metadata.{agent}"
        systems = _names(block.get("os"))
        if systems and platform not in systems:
            names = ", ".join(OS_NAMES.get(s, s) for s in systems)
            reasons.append(f"it is for {names} only ({where}.os), and Tusk runs on {OS_NAMES.get(platform, platform)}")
        if agent != "nanobot" and block.get("always") is True:
            continue  # OpenClaw's `always`: eligible whatever it requires (the os filter above still holds)
        reasons += _requirements(block.get("requires"), where)
    return tuple(reasons)


def _requirements(requires: object, where: str) -> list[str]:
    if not isinstance(requires, Mapping):
        return []
    out = []
    if bins := _names(requires.get("bins")):
        out.append(f"it needs the program{'s' if len(bins) > 1 else ''} {', '.join(bins)} ({where}.requires.bins), "
                   "and Tusk runs no programs")
    if any_bins := _names(requires.get("anyBins")):
        out.append(f"it needs one of the programs {', '.join(any_bins)} ({where}.requires.anyBins), "
                   "and Tusk runs no programs")
    if env := _names(requires.get("env")):
        out.append(f"it needs the environment variable{'s' if len(env) > 1 else ''} {', '.join(env)} "
                   f"({where}.requires.env) for programs Tusk does not run")
    if config := _names(requires.get("config")):
        out.append(f"it needs the agent setting{'s' if len(config) > 1 else ''} {', '.join(config)} "
                   f"({where}.requires.config), which Tusk does not have")
    return out
