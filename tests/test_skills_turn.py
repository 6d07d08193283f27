"""Skills in a chat's turns: the line in the prompt, read_skill on demand, per chat, /skills, /status, reload."""

import json
import os
import re

from bot.events import ChatKey, InboundMessage
from tests.conftest import running
from tests.outbox import started
from tests.fakes.fake_llm import Reply

REFUNDS = """---
name: refunds
description: How we answer refund questions. Use when someone asks to get their money back.
---

# Refunds

Always answer refund questions in this order:
1. Say "Refund policy R-7 applies."
2. Ask for the order number (it starts with TK-).
Never promise a date.
"""


def write_skill(home, name, text, **files):
    folder = home / "skills" / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(text)
    for rel, body in files.items():
        (folder / rel.replace("__", "/")).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel.replace("__", "/")).write_text(body)
    return folder


def skill(name, description, body="Do it the house way.", extra=""):
    return f"---\nname: {name}\ndescription: {description}\n{extra}---\n\n{body}\n"


def system(request):
    return request["messages"][0]["content"]


def offered(request):
    return {t["function"]["name"] for t in request.get("tools", [])}


def follows_refunds(body):
    """A model that follows the skill it read: its reply is built from the tool result's instructions."""
    messages = body["messages"]
    read = [m for m in messages if m["role"] == "tool" and m.get("name") == "read_skill" and "R-7" in m["content"]]
    if read:
        return Reply(text="Refund policy R-7 applies. What is your order number (TK-...)?")
    return Reply(text="I don't know the policy.")


async def test_a_dropped_in_skill_is_listed_read_and_followed(make_settings, fake_llm, tmp_path):
    """Drop a skill folder while Tusk runs: the next turn's prompt lists it, the model reads it and follows it."""
    settings = make_settings()
    async with running(settings) as tusk:
        await tusk.say("me", "hello")
        assert "## Skills" not in system(fake_llm.requests[0]) and "read_skill" not in offered(fake_llm.requests[0])
        write_skill(settings.home, "refunds", REFUNDS)
        fake_llm.script(Reply(text=None, tool_calls=[("c1", "read_skill", {"name": "refunds"})]))
        fake_llm.responder = follows_refunds
        replies = await tusk.say("me", "I want my money back for my order")
    first, second = fake_llm.requests[1], fake_llm.requests[2]
    assert "- refunds: How we answer refund questions. Use when someone asks to get their money back." in system(first)
    assert "read_skill" in offered(first)
    result = second["messages"][-1]
    assert result["role"] == "tool" and result["content"].startswith(
        "[The instructions of the skill \"refunds\" (the owner's, from $TUSK_HOME/skills): the owner's instructions")
    assert 'Say "Refund policy R-7 applies."' in result["content"] and "name: refunds" not in result["content"]
    assert replies == ["Refund policy R-7 applies. What is your order number (TK-...)?"]


async def test_a_home_without_skills_has_the_prompt_and_tools_it_had(make_settings, fake_llm, tmp_path):
    """No skill anywhere: no Skills section, no read_skill, and the fixed prompt counts the same as without skills."""
    async with running(make_settings()) as tusk:
        await tusk.say("a", "hi")
        status = await tusk.say("a", "/status")
    assert "Skills" not in system(fake_llm.requests[0]) and "read_skill" not in offered(fake_llm.requests[0])
    assert "Skills for this chat" not in status[0]


async def test_the_prompt_stays_byte_identical_until_a_skill_changes(make_settings, fake_llm):
    """Two turns with the same skills send the same system prompt; editing a skill's description changes it."""
    settings = make_settings()
    write_skill(settings.home, "refunds", REFUNDS)
    write_skill(settings.home, "oncall", skill("oncall", "Who is on call this week. Use for outages."))
    async with running(settings) as tusk:
        await tusk.say("me", "one")
        await tusk.say("me", "two")
        (settings.home / "skills/oncall/SKILL.md").write_text(skill("oncall", "The on-call rota. Use for outages."))
        await tusk.say("me", "three")
    a, b, c = (system(r) for r in fake_llm.requests)
    assert a == b and a != c
    assert a.index("- oncall:") < a.index("- refunds:")  # by name, whatever the folders' order
    assert "- oncall: The on-call rota. Use for outages." in c


async def test_removing_a_skill_takes_it_out_without_a_restart(make_settings, fake_llm):
    """The folder removed: the next turn has no Skills section, no read_skill, and reading it is refused."""
    import shutil

    settings = make_settings()
    folder = write_skill(settings.home, "refunds", REFUNDS)
    async with running(settings) as tusk:
        await tusk.say("me", "one")
        shutil.rmtree(folder)
        await tusk.say("me", "two")
    assert "- refunds:" in system(fake_llm.requests[0])
    assert "## Skills" not in system(fake_llm.requests[1]) and "read_skill" not in offered(fake_llm.requests[1])


async def test_reading_a_skill_another_chat_has_is_refused(make_settings, fake_llm):
    """TUSK_SKILLS_CHATS gives oncall to one chat: another chat's prompt lacks it and read_skill refuses it."""
    settings = make_settings(TUSK_SKILLS_CHATS="*,oncall=http:ops")
    write_skill(settings.home, "refunds", REFUNDS)
    write_skill(settings.home, "oncall", skill("oncall", "Who is on call. Use for outages.", "Page Ana first."))
    fake_llm.script(Reply(), Reply(text=None, tool_calls=[("c1", "read_skill", {"name": "oncall"})]), Reply())
    async with running(settings) as tusk:
        await tusk.say("ops", "who is on call?")
        await tusk.say("sales", "who is on call?")
    ops, sales, after = fake_llm.requests
    assert "- oncall:" in system(ops) and "- refunds:" in system(ops)
    assert "- oncall:" not in system(sales) and "- refunds:" in system(sales)
    refused = after["messages"][-1]["content"]
    assert refused.startswith("Error: SkillRefused: this chat has no skill named 'oncall' (its skills: refunds)")
    assert "Page Ana" not in refused


async def test_no_chat_gets_skills_when_the_setting_is_empty(make_settings, fake_llm):
    """TUSK_SKILLS_CHATS= (empty): skills exist but no chat gets them, nor read_skill."""
    settings = make_settings(TUSK_SKILLS_CHATS="")
    write_skill(settings.home, "refunds", REFUNDS)
    async with running(settings) as tusk:
        await tusk.say("me", "hi")
    assert "## Skills" not in system(fake_llm.requests[0]) and "read_skill" not in offered(fake_llm.requests[0])


async def test_groups_can_be_left_out(make_settings, fake_llm, tmp_path):
    """TUSK_SKILLS_GROUPS=off: a direct chat has the skills, a group does not."""
    write_skill(tmp_path / "data", "refunds", REFUNDS)
    async with started(make_settings, TUSK_SKILLS_GROUPS="off") as (app, box):
        await app.bus.publish(InboundMessage(ChatKey("telegram", "5"), "hi", sender_id="5", sender_name="Ann"))
        await app.bus.publish(InboundMessage(ChatKey("telegram", "-100"), "hi", sender_id="5", sender_name="Ann",
                                             is_group=True))
    direct, group = fake_llm.requests
    assert "- refunds:" in system(direct) and "read_skill" in offered(direct)
    assert "## Skills" not in system(group) and "read_skill" not in offered(group)


async def test_skills_and_status_commands_show_this_chats_skills(make_settings, fake_llm):
    """/skills lists the chat's skills with their descriptions; /status counts their tokens; neither calls the model."""
    settings = make_settings(TUSK_SKILLS_CHATS="*,oncall=http:ops")
    write_skill(settings.home, "refunds", REFUNDS)
    write_skill(settings.home, "oncall", skill("oncall", "Who is on call. Use for outages."))
    async with running(settings) as tusk:
        ops = (await tusk.say("ops", "/skills"))[0]
        sales = (await tusk.say("sales", "/skills"))[0]
        status = (await tusk.say("ops", "/status"))[0]
    assert fake_llm.requests == []
    assert ops.startswith("Skills of this chat (2, ~") and "- oncall: Who is on call. Use for outages." in ops
    assert "- refunds: How we answer refund questions." in ops
    assert "oncall" not in sales and "- refunds:" in sales
    assert "Skills for this chat: 2 (~" in status and "tokens of prompt, read_skill ~" in status


async def test_a_chat_without_skills_is_told_how_they_are_added(make_settings, fake_llm):
    """/skills in a chat with none says so and where the owner adds them."""
    async with running(make_settings()) as tusk:
        reply = (await tusk.say("x", "/skills"))[0]
    assert reply.startswith("This chat has no skills.") and "tusk skills list" in reply


async def test_status_counts_the_skills_in_the_prompt_size(make_settings, fake_llm):
    """/status's prompt estimate grows by the skills section and read_skill's schema when a skill is added."""
    import re

    settings = make_settings()
    async with running(settings) as tusk:
        before = (await tusk.say("me", "/status"))[0]
        write_skill(settings.home, "refunds", REFUNDS)
        after = (await tusk.say("me", "/status"))[0]
    size = lambda text: int(re.search(r"Prompt: ~([\d,]+) of", text)[1].replace(",", ""))  # noqa: E731
    section, tool = (int(n.replace(",", "")) for n in
                     re.search(r"~([\d,]+) tokens of prompt, read_skill ~([\d,]+)", after).groups())
    assert size(after) - size(before) >= section + tool - 5 and section > 60 and tool > 40


async def test_an_always_skill_has_its_body_in_the_prompt(make_settings, fake_llm):
    """nanobot's `always: true`: the body is in the system prompt, framed as the owner's, not just its line."""
    settings = make_settings()
    write_skill(settings.home, "house-rules", skill("house-rules", "The rules of this server.",
                                                    "No politics. Answer in English.", "always: true\n"))
    async with running(settings) as tusk:
        await tusk.say("me", "hi")
    prompt = system(fake_llm.requests[0])
    assert "### Skill: house-rules (always in force)\n\nNo politics. Answer in English." in prompt
    assert "- house-rules:" not in prompt and "The owner's playbooks" in prompt


async def test_the_list_stops_at_the_token_cap_and_says_how_to_read_the_rest(make_settings, fake_llm):
    """Past TUSK_SKILLS_MAX_TOKENS the list counts the rest; read_skill "*" lists every skill of the chat."""
    settings = make_settings(TUSK_SKILLS_MAX_TOKENS=200)
    for i in range(30):
        write_skill(settings.home, f"skill-{i:02d}", skill(f"skill-{i:02d}", f"Playbook number {i} for the team."))
    fake_llm.script(Reply(text=None, tool_calls=[("c1", "read_skill", {"name": "*"})]), Reply())
    async with running(settings) as tusk:
        await tusk.say("me", "what playbooks are there?")
    prompt = system(fake_llm.requests[0])
    listed = [n for n in range(30) if f"- skill-{n:02d}:" in prompt]
    assert listed == list(range(len(listed))) and 0 < len(listed) < 30
    assert f'- ({30 - len(listed)} more skills not listed here: read_skill with name "*" lists them all)' in prompt
    everything = fake_llm.requests[1]["messages"][-1]["content"]
    assert everything.startswith("The 30 skill(s) of this chat") and "- skill-29: Playbook number 29" in everything


async def test_a_reference_file_is_read_and_escapes_are_refused(make_settings, fake_llm, tmp_path):
    """read_skill gives a file the skill names; `..`, an absolute path and a link out come back refused."""
    settings = make_settings(TUSK_SKILLS_DIRS=str(tmp_path / "team-skills"))
    (tmp_path / "secret.txt").write_text("the vault code is 0000")
    folder = tmp_path / "team-skills" / "refunds"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(REFUNDS.replace("Never promise", "See references/policy.md. Never promise"))
    (folder / "references").mkdir()
    (folder / "references/policy.md").write_text("Refunds within 30 days, R-7.")
    os.symlink(tmp_path / "secret.txt", folder / "references/leak.md")
    calls = [("c1", "read_skill", {"name": "refunds", "file": "references/policy.md"}),
             ("c2", "read_skill", {"name": "refunds", "file": "../../secret.txt"}),
             ("c3", "read_skill", {"name": "refunds", "file": str(tmp_path / "secret.txt")}),
             ("c4", "read_skill", {"name": "refunds", "file": "references/leak.md"})]
    fake_llm.script(Reply(text=None, tool_calls=calls), Reply())
    async with running(settings) as tusk:
        await tusk.say("me", "refund?")
    results = dict(zip(("c1", "c2", "c3", "c4"),
                       (m["content"] for m in fake_llm.requests[1]["messages"] if m["role"] == "tool")))
    assert results["c1"].startswith("[The file references/policy.md of the skill \"refunds\" (the owner's, from "
                                    f"{tmp_path / 'team-skills'})") and "Refunds within 30 days, R-7." in results["c1"]
    assert results["c2"] == "Error: SkillRefused: ../../secret.txt leaves the skill's folder (..): only files inside it are read"
    assert results["c3"].startswith(f"Error: SkillRefused: {tmp_path / 'secret.txt'} is an absolute path")
    assert results["c4"] == ("Error: SkillRefused: references/leak.md is a link that leads out of the skill's folder: "
                             "not read")
    assert not any("0000" in r for r in results.values())


async def test_a_skills_list_of_the_console_shows_each_with_why(make_settings, fake_llm):
    """GET /api/skills: every folder with its source, offered or not, and the reason."""
    settings = make_settings()
    write_skill(settings.home, "refunds", REFUNDS)
    write_skill(settings.home, "github", skill("github", "Use the gh CLI.",
                                               extra='metadata: {"nanobot":{"requires":{"bins":["gh"]}}}\n'))
    async with running(settings) as tusk:
        async with tusk.client.get(f"{tusk.url}/api/skills") as resp:
            assert resp.status == 200
            data = await resp.json()
    by = {s["name"]: s for s in data["skills"]}
    assert by["refunds"]["offered"] and by["refunds"]["source"] == "$TUSK_HOME/skills" and by["refunds"]["chats"] == "*"
    assert not by["github"]["offered"]
    assert by["github"]["why_not"] == ("it needs the program gh (metadata.nanobot.requires.bins), and Tusk runs "
                                       "no programs")
    assert json.dumps(data).count("github") >= 1 and data["max_tokens"] == 1000


async def test_a_small_window_gets_no_skills_and_a_mid_one_a_smaller_cap(make_settings, fake_llm):
    """A 2,048-token window: no Skills section, no read_skill, /skills says why; 8,192: the section within 512."""
    settings = make_settings(TUSK_CONTEXT_WINDOW=2048)
    for i in range(40):
        write_skill(settings.home, f"s-{i:02d}", skill(f"s-{i:02d}", f"Playbook {i} of the team."))
    async with running(settings) as tusk:
        await tusk.say("me", "hi")
        told = (await tusk.say("me", "/skills"))[0]
    assert "## Skills" not in system(fake_llm.requests[0]) and "read_skill" not in offered(fake_llm.requests[0])
    assert told.startswith("No skills with this model: its window (2,048 tokens) is too small")
    fake_llm.requests.clear()
    async with running(make_settings(TUSK_CONTEXT_WINDOW=8192)) as tusk:
        await tusk.say("me", "hi")
        status = (await tusk.say("me", "/status"))[0]
    part = system(fake_llm.requests[0]).split("## Skills", 1)[1]
    assert "more skills not listed here" in part
    assert int(re.search(r"~([\d,]+) tokens of prompt", status)[1].replace(",", "")) <= 512


def docs_blocks():
    """The worked example of docs/skills.md: its SKILL.md, and the code blocks that show what Tusk does with it."""
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "skills.md").read_text()
    blocks = re.findall(r"```[a-z]*\n(.*?)```", text, re.DOTALL)
    return {"skill": next(b for b in blocks if b.startswith("---\nname: refunds")),
            "list": next(b for b in blocks if b.startswith("$ tusk skills list")),
            "prompt": next(b for b in blocks if b.startswith("## Skills")),
            "commands": next(b for b in blocks if b.startswith("/skills"))}


async def test_the_docs_worked_example_is_what_tusk_does(make_settings, fake_llm):
    """docs/skills.md's refunds skill, dropped into a home: its listing, prompt section, /skills and /status lines."""
    from bot.skills.catalog import Catalog
    from bot.skills.views import listing

    flat = lambda text: " ".join(text.split())  # noqa: E731 - the docs wrap long lines
    blocks = docs_blocks()
    settings = make_settings()
    write_skill(settings.home, "refunds", blocks["skill"], **{"references__policy.md": "The long version.\n"})
    shown = listing(settings.skill_settings(), Catalog(settings.skill_settings().roots, log=False)).splitlines()
    documented = blocks["list"].splitlines()[1:]
    assert shown[:-1] == documented[:-1] and shown[-1].endswith("/skills/refunds")
    async with running(settings) as tusk:
        await tusk.say("me", "hi")
        skills = (await tusk.say("me", "/skills"))[0]
        status = (await tusk.say("me", "/status"))[0]
    prompt = system(fake_llm.requests[0])
    assert flat(blocks["prompt"]) in flat(prompt)
    commands = blocks["commands"].split("\n\n/status\n")
    assert flat(commands[0].removeprefix("/skills\n")) == flat(skills)
    assert commands[1].removeprefix("...\n").strip() in status


async def test_a_model_that_takes_no_tools_gets_no_skills(make_settings, fake_llm):
    """A model known to refuse tools (models.json): no Skills section asking for read_skill; /skills says why."""
    settings = make_settings()
    write_skill(settings.home, "refunds", REFUNDS)
    (settings.home / "models.json").write_text(json.dumps({"openai/fake-model": {"no_tools": True}}))
    async with running(settings) as tusk:
        await tusk.say("me", "hi")
        told = (await tusk.say("me", "/skills"))[0]
    prompt = system(fake_llm.requests[0])
    assert "## Tools\n\nNone" in prompt and "## Skills" not in prompt and "tools" not in fake_llm.requests[0]
    assert told == "No skills with this model: it takes no tools, so it could not read one."
