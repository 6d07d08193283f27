"""The fixed prompt of a new chat's first turn: the system prompt and every default tool's schema, per tool.

What every turn of every chat pays before its history: built by the real TuskApp (a fresh home, no
AGENTS.md, SOUL.md or MEMORY.md, the default tools: memory, reminders, tasks, web_fetch; web_search too
when a search key is set; `read_skill` only in a home with skills), and counted two ways:

- as the provider counts it: litellm's `token_counter` for an OpenAI model (`gpt-4o-mini`) with the
  tools, which follows OpenAI's rules for function definitions (what the request's `usage.prompt_tokens`
  says, less the runtime line and the message);
- as Tusk budgets it (bot/context.py `fixed_tokens`: cl100k over the system prompt and the schemas' JSON,
  a little more than the provider's count, so the budget errs on the safe side).

Per tool: the provider's count with all tools less the count without that one. Also the home with one
skill (the Skills section and `read_skill`).

    python bench/prompt.py
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

PROVIDER_MODEL = "gpt-4o-mini"
GOAL = 1500


def app_for(skills: int = 0):
    from bot.app import TuskApp
    from bot.config import load_settings

    home = Path(tempfile.mkdtemp(prefix="tusk-prompt-"))
    os.environ["HOME"] = str(home)  # no ~/.agents/skills of this machine's
    for i in range(skills):
        folder = home / "skills" / f"playbook-{i}"
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(f"---\nname: playbook-{i}\ndescription: How the team handles refunds, "
                                         "exchanges and late deliveries. Use when a customer asks.\n---\n\nSteps.\n")
    return TuskApp(load_settings(TUSK_HOME=str(home), TUSK_MODEL="openai/fake-model", TUSK_API_BASE="http://x/v1")), home


def first_prompt(app, home: Path) -> tuple[str, list[dict], int]:
    """(system prompt, tool schemas, Tusk's fixed-token estimate) of a new HTTP direct chat's first turn."""
    from bot.events import ChatKey, InboundMessage
    from memory.paths import ChatFiles

    files = ChatFiles.locate(home, "http", "bench")
    msg = InboundMessage(ChatKey("http", "bench"), "hello", sender_id="u", is_group=False)
    schemas = list(app.tools.for_chat(msg).schemas)  # the turn's tools (web_fetch, read_skill: per chat)
    context = app.agent.context
    return context.system_prompt(files), schemas, context.fixed_tokens(files)


def provider_count(system: str, tools: list[dict]) -> int:
    from bot.llm import litellm

    return litellm().token_counter(model=PROVIDER_MODEL, messages=[{"role": "system", "content": system}],
                                   tools=tools or None)


def main() -> None:
    from bot.llm import load_litellm

    load_litellm().result()
    app, home = app_for()
    system, tools, estimate = first_prompt(app, home)
    total = provider_count(system, tools)
    bare = provider_count(system, [])
    print(f"first turn of a new chat, every default tool ({len(tools)}), no skills:")
    print(f"  fixed prompt, as the provider counts it   {total:,} tokens (goal <= {GOAL:,})")
    print(f"  of which the system prompt                {bare:,}")
    print(f"  as Tusk budgets it (fixed_tokens)         {estimate:,}")
    print("  per tool (all tools less the count without it):")
    for schema in tools:
        name = schema["function"]["name"]
        without = provider_count(system, [t for t in tools if t is not schema])
        print(f"    {name:<22} {total - without:>4}   description {len(schema['function'].get('description', '')):>4} chars")
    app_skill, home_skill = app_for(skills=1)
    system, tools, estimate = first_prompt(app_skill, home_skill)
    print(f"a home with one skill: {provider_count(system, tools):,} tokens as the provider counts it "
          f"({estimate:,} as Tusk budgets it; tools: {', '.join(t['function']['name'] for t in tools)})")


if __name__ == "__main__":
    main()
