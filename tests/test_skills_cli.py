"""`tusk skills list` as a person runs it: with no skills, with a wrong setting, and without loading the model."""

from tests.test_cli import env_for
from tests.test_cli import tusk as tusk_cli
from tests.test_startup import imported


async def test_no_skills_says_where_to_put_one(fake_llm, tmp_path):
    """An empty home: where Tusk looked (the shared folder absent) and where a skill goes."""
    code, out, err = await tusk_cli("skills", "list", env=env_for(fake_llm, tmp_path))
    assert code == 0, err
    assert out.startswith("No skills. Looked in: $TUSK_HOME/skills (absent), ~/.agents/skills (absent).")
    assert f"Add one as a folder with a SKILL.md (name and description in its frontmatter) in {tmp_path}/data/skills" in out


async def test_a_wrong_chat_setting_is_one_line_and_exit_2(fake_llm, tmp_path):
    """TUSK_SKILLS_CHATS with a bare word: `tusk skills list` says what to write, exit code 2."""
    code, out, err = await tusk_cli("skills", "list", env=env_for(fake_llm, tmp_path, TUSK_SKILLS_CHATS="telegram"))
    assert code == 2 and err.startswith("tusk: TUSK_SKILLS_CHATS: chat pattern 'telegram' is not *, channel:*")


def test_listing_skills_loads_neither_litellm_nor_mcp(fake_llm, tmp_path):
    """The command needs no model: litellm, openai and the MCP SDK are never imported."""
    skill = tmp_path / "data/skills/refunds"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: refunds\ndescription: Refunds.\n---\nSteps.\n")
    modules, code = imported(tmp_path, env_for(fake_llm, tmp_path), "skills", "list")
    assert code == 0 and not {"litellm", "openai", "mcp"} & modules
