"""Skill folders read and checked: bad input skipped with its reason, requirements, roots and reloads, the cap."""

import logging
import os
import re

import pytest

from bot.errors import ConfigError
from bot.events import ChatKey
from bot.skills import metadata
from bot.skills.catalog import Catalog, Root, roots
from bot.skills.config import ChatRules, SkillSettings
from bot.skills.prompt import section
from bot.skills.views import checks, listing
from memory.tokens import count_text


def write(root, name, text, mode="w"):
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_bytes(text) if isinstance(text, bytes) else (folder / "SKILL.md").write_text(text)
    return folder


def skill(name, description="Does a thing. Use when asked.", body="Steps.", extra=""):
    return f"---\nname: {name}\ndescription: {description}\n{extra}---\n\n{body}\n"


def home_catalog(tmp_path, *extra_roots):
    return Catalog([Root(tmp_path / "skills", "home", "$TUSK_HOME/skills"), *extra_roots])


BAD = {
    "no-frontmatter": ("# Just a heading\n\nSome text.\n", "SKILL.md has no YAML frontmatter"),
    "no-name": ("---\ndescription: Something.\n---\nBody\n", "SKILL.md's frontmatter has no name"),
    "upper": (skill("Upper"), "the name 'Upper' is not a skill name"),
    "double--hyphen": (skill("double--hyphen"), "the name 'double--hyphen' is not a skill name"),
    "x" * 65: (skill("x" * 65), f"the name '{'x' * 65}' is not a skill name"),
    "elsewhere": (skill("other-name"), "the name 'other-name' is not its folder's ('elsewhere')"),
    "no-description": ("---\nname: no-description\n---\nBody\n", "SKILL.md's frontmatter has no description"),
    "long-description": (skill("long-description", "d" * 1025), "the description has 1,025 characters"),
    "broken-yaml": ("---\nname: broken-yaml\ndescription: [unclosed\n---\nBody\n",
                    "SKILL.md's frontmatter is not valid YAML at line"),
    "a-list": ("---\n- name\n- description\n---\nBody\n", "SKILL.md's frontmatter is not a mapping"),
    "huge": (skill("huge", body="x" * (5 << 20)), "SKILL.md is 5,242,"),
    "binary": (b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR" + bytes(range(256)), "SKILL.md is a binary file, not text"),
    "latin1": (skill("latin1", "caf\u00e9").encode("latin-1"), "SKILL.md is not UTF-8 text"),
}


def test_bad_skills_are_skipped_with_their_reason_and_the_others_load(tmp_path, caplog):
    """Each kind of bad SKILL.md is skipped, saying why, once in the log, and a doctor warning; good ones load."""
    for name, (text, _) in BAD.items():
        write(tmp_path / "skills", name, text)
    write(tmp_path / "skills", "good", skill("good"))
    (tmp_path / "skills" / "empty-folder").mkdir()
    catalog = home_catalog(tmp_path)
    with caplog.at_level(logging.WARNING, logger="bot.skills.catalog"):
        snap = catalog.snapshot()
        catalog.snapshot()  # the same folders again: nothing new to say
    by = {e.name: e for e in snap.entries}
    assert [s.name for s in snap.offered] == ["good"]
    for name, (_, reason) in BAD.items():
        assert not by[name].offered and by[name].problem.startswith(reason), (name, by[name].problem)
        assert sum(f"{tmp_path / 'skills' / name} skipped: {reason}" in r.getMessage() for r in caplog.records) == 1
    assert by["empty-folder"].problem == "no SKILL.md in the folder"
    settings = SkillSettings(catalog.roots)
    warned = {c.name for c in checks(settings, catalog) if c.verdict == "warn"}
    assert warned == {f"skill {name}" for name in [*BAD, "empty-folder"]}


def test_frontmatter_without_a_body_and_with_windows_line_ends_is_read(tmp_path):
    """CRLF line ends, a BOM, a folded description and an empty body: a valid skill, description on one line."""
    text = "\ufeff---\r\nname: crlf\r\ndescription: >\r\n  Two lines\r\n  folded.\r\n---\r\n"
    write(tmp_path / "skills", "crlf", text.encode("utf-8"))
    snap = home_catalog(tmp_path).snapshot()
    assert snap.get("crlf").description == "Two lines folded." and snap.get("crlf").body == ""


def test_what_a_skill_requires_keeps_it_out_with_the_reason(tmp_path):
    """nanobot bins, OpenClaw env/config/anyBins, an OS filter and disable-model-invocation are unmet; the reason says so."""
    cases = {
        "gh-cli": ('metadata: {"nanobot":{"requires":{"bins":["gh"]}}}\n',
                   "it needs the program gh (metadata.nanobot.requires.bins), and Tusk runs no programs"),
        "gemini": ("metadata:\n  {\n    \"openclaw\":\n      {\n        \"requires\": { \"env\": [\"GEMINI_API_KEY\"], "
                   "\"config\": [\"browser.enabled\"] },\n      },\n  }\n",
                   "it needs the environment variable GEMINI_API_KEY (metadata.openclaw.requires.env) for programs "
                   "Tusk does not run; it needs the agent setting browser.enabled (metadata.openclaw.requires.config), "
                   "which Tusk does not have"),
        "any-bin": ("metadata: '{\"clawdbot\": {\"requires\": {\"anyBins\": [\"rg\", \"grep\"]}}}'\n",
                    "it needs one of the programs rg, grep (metadata.clawdbot.requires.anyBins), and Tusk runs no programs"),
        "mac-only": ('metadata: {"openclaw": {"os": ["darwin"]}}\n',
                     "it is for macOS only (metadata.openclaw.os), and Tusk runs on Linux"),
        "hidden": ("disable-model-invocation: true\n",
                   "disable-model-invocation is true: only a person may start it, and Tusk has no way to"),
    }
    for name, (extra, _) in cases.items():
        write(tmp_path / "skills", name, skill(name, extra=extra))
    write(tmp_path / "skills", "eligible", skill("eligible", extra='metadata: {"openclaw": {"always": true, '
                                                  '"requires": {"bins": ["uv"]}}}\n'))
    write(tmp_path / "skills", "emoji", skill("emoji", extra='metadata: {"nanobot": {"emoji": "x"}}\nlicense: MIT\n'))
    snap = home_catalog(tmp_path).snapshot()
    by = {e.name: e for e in snap.entries}
    for name, (_, reason) in cases.items():
        assert not by[name].offered and by[name].why_not == reason, name
    assert by["eligible"].offered and by["emoji"].offered and by["emoji"].skill.license == "MIT"
    assert not by["eligible"].skill.always  # OpenClaw's always: eligible whatever it needs, not a body in the prompt


def test_nanobot_always_reads_both_places():
    """`always: true` at the top or under metadata.nanobot puts the body in the prompt; a string "true" does not."""
    assert metadata.always({"always": True})
    assert metadata.always({"metadata": {"nanobot": {"always": True}}})
    assert metadata.always({"metadata": '{"nanobot": {"always": true}}'})
    assert not metadata.always({"always": "true"}) and not metadata.always({"metadata": {"openclaw": {"always": True}}})


def test_the_first_root_with_a_name_wins_and_the_others_are_listed(tmp_path):
    """A name in $TUSK_HOME/skills wins over the same name in TUSK_SKILLS_DIRS, which is listed as shadowed."""
    write(tmp_path / "skills", "refunds", skill("refunds", "Ours."))
    write(tmp_path / "team", "refunds", skill("refunds", "The team's."))
    write(tmp_path / "team", "oncall", skill("oncall", "On call."))
    team = Root(tmp_path / "team", "TUSK_SKILLS_DIRS", str(tmp_path / "team"))
    catalog = home_catalog(tmp_path, team)
    snap = catalog.snapshot()
    assert [(s.name, s.description) for s in snap.offered] == [("oncall", "On call."), ("refunds", "Ours.")]
    text = listing(SkillSettings(catalog.roots), catalog)
    assert f"refunds  [{tmp_path / 'team'}]  NOT OFFERED: a skill of this name in $TUSK_HOME/skills wins" in text


def test_a_link_in_the_data_dir_is_not_followed_but_one_in_a_shared_root_is(tmp_path):
    """A symlinked skill folder under $TUSK_HOME/skills is skipped; the same link in TUSK_SKILLS_DIRS is a skill."""
    real = write(tmp_path / "elsewhere", "linked", skill("linked"))
    (tmp_path / "skills").mkdir()
    (tmp_path / "team").mkdir()
    os.symlink(real, tmp_path / "skills" / "linked")
    os.symlink(real, tmp_path / "team" / "linked")
    write(tmp_path / "team", "outside-md", skill("outside-md"))
    (tmp_path / "team" / "outside-md" / "SKILL.md").unlink()
    os.symlink(real / "SKILL.md", tmp_path / "team" / "outside-md" / "SKILL.md")
    catalog = home_catalog(tmp_path, Root(tmp_path / "team", "TUSK_SKILLS_DIRS", "team"))
    entries = catalog.snapshot().entries
    home, team = [e for e in entries if e.name == "linked"]
    assert home.problem.startswith("a symbolic link, and Tusk never follows links in its data dir")
    assert team.shadowed_by is not None  # the home's broken folder of that name still wins: its owner sees why
    outside = next(e for e in entries if e.name == "outside-md")
    assert outside.problem == "SKILL.md is a link to a file outside its skill's folder"


def test_changes_are_seen_and_only_changed_skills_are_read_again(tmp_path):
    """Add, change, remove: each snapshot shows it; an unchanged skill is the same object, an unchanged catalog the same snapshot."""
    root = tmp_path / "skills"
    write(root, "a", skill("a", "First."))
    catalog = home_catalog(tmp_path)
    one = catalog.snapshot()
    assert catalog.snapshot() is one
    write(root, "b", skill("b", "Second."))
    two = catalog.snapshot()
    assert [s.name for s in two.offered] == ["a", "b"] and two.get("a") is one.get("a")
    (root / "b" / "SKILL.md").write_text(skill("b", "Second, changed."))
    three = catalog.snapshot()
    assert three.get("b").description == "Second, changed." and three.get("a") is one.get("a")
    import shutil

    shutil.rmtree(root / "a")
    assert [s.name for s in catalog.snapshot().offered] == ["b"]


def test_the_section_is_sorted_capped_and_counts_what_it_leaves_out(tmp_path):
    """Lines by name up to the cap, then one line counting the rest; an `always` body too big becomes a line."""
    for i in range(40):
        write(tmp_path / "skills", f"s-{i:02d}", skill(f"s-{i:02d}", f"Playbook {i}."))
    write(tmp_path / "skills", "big-rules", skill("big-rules", "Rules.", body="rule " * 2000, extra="always: true\n"))
    skills = home_catalog(tmp_path).snapshot().offered
    part = section(list(reversed(skills)), 300)
    assert part.tokens <= 300 and part.always == () and part.listed[0] == "big-rules"
    assert list(part.listed[1:]) == [f"s-{i:02d}" for i in range(len(part.listed) - 1)]
    assert part.text.endswith(f'- ({len(part.left_out)} more skills not listed here: read_skill with name "*" lists them all)')
    assert section(skills, 300) == part and count_text(part.text) == part.tokens
    roomy = section(skills, 20_000)
    assert roomy.left_out == () and roomy.always == ("big-rules",) and "(always in force)\n\nrule rule" in roomy.text


def test_chat_rules_give_each_skill_its_chats():
    """Plain patterns for every skill, `skill=pattern` narrows one, `skill=off` gives it to none."""
    rules = ChatRules.parse("telegram:*, oncall=slack:C1, oncall=http:ops, tmux=off")
    assert rules.gives("refunds", ChatKey("telegram", "5")) and not rules.gives("refunds", ChatKey("slack", "C1"))
    assert rules.gives("oncall", ChatKey("slack", "C1")) and rules.gives("oncall", ChatKey("http", "ops"))
    assert not rules.gives("oncall", ChatKey("telegram", "5")) and not rules.gives("tmux", ChatKey("telegram", "5"))
    assert not ChatRules.parse("").gives("refunds", ChatKey("http", "me"))


@pytest.mark.parametrize("value", ["telegram", "Bad_Name=*", "oncall=slack"])
def test_a_wrong_chat_setting_stops_tusk_naming_it(make_settings, value):
    """A TUSK_SKILLS_CHATS item that is neither a pattern nor skill=pattern is a ConfigError with the format."""
    with pytest.raises(ConfigError, match="TUSK_SKILLS_CHATS: .* Write chat patterns"):
        make_settings(TUSK_SKILLS_CHATS=value).skill_settings()


def test_the_roots_are_the_home_the_shared_folder_and_the_dirs(make_settings, tmp_path, monkeypatch):
    """$TUSK_HOME/skills, then ~/.agents/skills (unless TUSK_SKILLS_SHARED=off), then TUSK_SKILLS_DIRS in order."""
    settings = make_settings(TUSK_SKILLS_DIRS=f"{tmp_path}/a, {tmp_path}/b").skill_settings()
    assert [r.path for r in settings.roots] == [tmp_path / "data/skills", tmp_path / "user-home/.agents/skills",
                                                tmp_path / "a", tmp_path / "b"]
    assert [r.source for r in make_settings(TUSK_SKILLS_SHARED="off").skill_settings().roots] == ["home"]
    assert roots(tmp_path, False, ())[0].label == "$TUSK_HOME/skills"


def test_the_listing_shows_the_optional_fields(tmp_path):
    """license, compatibility and allowed-tools (a string or a list) are shown, the last marked as not enforced."""
    write(tmp_path / "skills", "pdf", skill("pdf", extra="license: Apache-2.0\ncompatibility: Requires poppler\n"
                                                  "allowed-tools:\n  - Bash(pdftotext:*)\n  - Read\n"))
    catalog = home_catalog(tmp_path)
    text = listing(SkillSettings(catalog.roots), catalog)
    assert "    license: Apache-2.0\n    compatibility: Requires poppler\n" in text
    assert "    allowed-tools: Bash(pdftotext:*) Read (not enforced)" in text


def test_read_skill_files_stay_inside_and_are_text(tmp_path):
    """Links inside a shared root's skill are read, none in the data dir; hidden, binary, oversized and missing
    files are refused with the reason; a script is shown as text, marked never run; a long file is cut."""
    from bot.errors import SkillRefused
    from bot.skills import read

    for root in ("skills", "team"):
        folder = write(tmp_path / root, "pdf", skill("pdf", body="See references/a.md."))
        (folder / "references").mkdir()
        (folder / "references/a.md").write_text("A" * 5000)
        os.symlink(folder / "references/a.md", folder / "references/b.md")
        (folder / ".env").write_text("TOKEN=x")
        (folder / "references/pic.png").write_bytes(b"\x89PNG\0\0")
        (folder / "scripts").mkdir()
        (folder / "scripts/run.sh").write_text("echo hi\n")
        (folder / "references/big.md").write_text("x" * ((1 << 20) + 1))
    catalog = home_catalog(tmp_path, Root(tmp_path / "team", "TUSK_SKILLS_DIRS", "team"))
    home, team = [e for e in catalog.snapshot().entries if e.name == "pdf"]
    assert "A" * 100 in read.file_text(team, "references/b.md", 10_000)
    with pytest.raises(SkillRefused, match="goes through a symbolic link, and Tusk follows none in its data dir"):
        read.file_text(home, "references/b.md", 10_000)
    refusals = {".env": "is a hidden file", "references/pic.png": "references/pic.png is a binary file",
                "references/big.md": "is 1,048,577 bytes; read_skill reads files up to 1,048,576",
                "references/none.md": "has no file references/none.md (its files: references/a.md, "
                                      "references/big.md, references/pic.png, scripts/run.sh)"}  # no link listed
    for rel, reason in refusals.items():
        with pytest.raises(SkillRefused, match=re.escape(reason)):
            read.file_text(home, rel, 10_000)
    script = read.file_text(home, "scripts/run.sh", 10_000)
    assert "(a script: Tusk never runs it; it is shown as text)\n\necho hi" in script
    cut = read.file_text(home, "references/a.md", 1000)
    assert "[... cut here: " in cut and len(cut) < 1400
    whole = read.file_text(home, "", 10_000)
    assert whole.endswith('[Files in its folder, read with read_skill(name="pdf", file=...): references/a.md, '
                          "references/big.md, references/pic.png, scripts/run.sh (never run)]")
