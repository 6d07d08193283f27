"""Real skills no one here wrote: nanobot-ai 0.3.5's packaged skills (its wheel, from the package index), in
Tusk's home; `tusk skills list` and `tusk doctor` about them; `tusk import --format nanobot` bringing a
workspace's skills/ folder, asking before it replaces one."""

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest

from tests.conftest import running
from tests.fakes.fake_llm import Reply, attributing_responder
from tests.test_cli import env_for
from tests.test_cli import tusk as tusk_cli

NANOBOT = "nanobot-ai==0.3.5"
NEEDS = {"github": "gh", "summarize": "summarize", "tmux": "tmux", "weather": "curl"}  # metadata.nanobot.requires.bins
OFFERED = ["clawhub", "cron", "image-generation", "memory", "my", "skill-creator", "update-setup"]
FIXTURES = Path(__file__).parent / "fixtures" / "imports"
SESSION = Path("sessions/0123456789abcdef0123456789abcdef/dGVsZWdyYW06NDI0Mg.jsonl")  # telegram:4242


@pytest.fixture(scope="session")
def nanobot_wheel(pytestconfig, tmp_path_factory) -> Path:
    """nanobot-ai's wheel, fetched once with pip (kept in pytest's cache folder, or this run's temporary folder when
    the cache is off); if the package index cannot be reached, skipped saying why (failed under CI, which reaches it)."""
    keep = getattr(pytestconfig, "cache", None)
    cache = keep.mkdir("nanobot-ai-0.3.5") if keep is not None else tmp_path_factory.mktemp("nanobot-ai-0.3.5")
    found = sorted(cache.glob("nanobot_ai-0.3.5-*.whl"))
    if found:
        return found[0]
    with tempfile.TemporaryDirectory() as tmp:  # downloaded beside, then moved in whole (xdist workers race)
        env = {k: v for k, v in os.environ.items() if k.startswith("PIP_") or k in ("PATH", "LANG")}
        env["HOME"] = tmp
        done = subprocess.run([sys.executable, "-m", "pip", "download", NANOBOT, "--no-deps", "--only-binary=:all:",
                               "--disable-pip-version-check", "-q", "-d", tmp], env=env, cwd=tmp,
                              capture_output=True, text=True, timeout=600)
        wheels = sorted(Path(tmp).glob("nanobot_ai-0.3.5-*.whl"))
        if done.returncode != 0 or not wheels:
            why = f"pip could not fetch {NANOBOT} from the package index: {done.stderr.strip()[-300:]}"
            if os.environ.get("CI"):  # CI reaches the index: there a missing wheel is a failure, not a skip
                pytest.fail(why)
            pytest.skip(why)
        os.replace(wheels[0], cache / wheels[0].name)
    return cache / wheels[0].name


def unpack_skills(wheel: Path, target: Path) -> Path:
    """The wheel's nanobot/skills/<name>/... folders into `target` (its README left out)."""
    with zipfile.ZipFile(wheel) as whl:
        for member in whl.namelist():
            if member.startswith("nanobot/skills/") and member.count("/") >= 3:
                out = target / member.removeprefix("nanobot/skills/")
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_bytes(whl.read(member))
    return target


@pytest.fixture
def home_with_nanobot_skills(nanobot_wheel, tmp_path) -> Path:
    return unpack_skills(nanobot_wheel, tmp_path / "data" / "skills").parent


async def test_nanobots_skills_are_offered_or_reported(home_with_nanobot_skills, fake_llm, tmp_path):
    """`tusk skills list`: every packaged skill is read; those needing gh, summarize, tmux or curl are not offered,
    each with its program named; `tusk doctor` warns about the same four."""
    env = env_for(fake_llm, tmp_path)
    code, out, err = await tusk_cli("skills", "list", env=env)
    assert code == 0, err
    assert out.startswith(f"{len(OFFERED)} skill(s) offered, {len(NEEDS)} not.")
    for name, program in NEEDS.items():
        assert (f"{name}  [$TUSK_HOME/skills]  NOT OFFERED: it needs the program {program} "
                "(metadata.nanobot.requires.bins), and Tusk runs no programs") in out
    for name in OFFERED:
        assert f"{name}  [$TUSK_HOME/skills]  offered to *" in out
    code, out, err = await tusk_cli("doctor", "--no-model", env=env)
    warned = [line for line in out.splitlines() if line.startswith("WARN  skill ")]
    assert sorted(w.split(":")[0] for w in warned) == [f"WARN  skill {n}" for n in sorted(NEEDS)]
    assert f"OK    skills: {len(OFFERED)} offered" in out


async def test_a_nanobot_skill_that_needs_only_tusks_tools_is_read_in_a_turn(home_with_nanobot_skills, make_settings,
                                                                             fake_llm):
    """The prompt lists cron but not github; read_skill gives cron's instructions and a file of `my`'s folder."""
    fake_llm.script(Reply(text=None, tool_calls=[("c1", "read_skill", {"name": "cron"}),
                                                 ("c2", "read_skill", {"name": "my", "file": "references/examples.md"}),
                                                 ("c3", "read_skill", {"name": "github"})]),
                    Reply(text="I'll set a reminder with set_reminder."))
    async with running(make_settings()) as tusk:
        await tusk.say("me", "remind me every morning to stretch")
    prompt = fake_llm.requests[0]["messages"][0]["content"]
    assert "- cron: Schedule reminders and recurring tasks." in prompt and "- github:" not in prompt
    cron, example, github = (m["content"] for m in fake_llm.requests[1]["messages"] if m["role"] == "tool")
    assert cron.startswith('[The instructions of the skill "cron"') and "## Three Modes" in cron
    assert example.startswith('[The file references/examples.md of the skill "my"')
    examples = (home_with_nanobot_skills / "skills/my/references/examples.md").read_text()
    assert examples.strip()[:200] in example
    assert github.startswith("Error: SkillRefused: this chat has no skill named 'github'")


def workspace_with_skills(tmp_path, wheel) -> Path:
    """A copy of the nanobot 0.3.5 instance fixture whose workspace has nanobot's skills in skills/."""
    instance = tmp_path / "nanobot"
    shutil.copytree(FIXTURES / "nanobot035", instance)
    unpack_skills(wheel, instance / "workspace" / "skills")
    return instance


async def test_import_brings_the_workspaces_skills_asking_before_a_replace(nanobot_wheel, fake_llm, tmp_path):
    """Without --yes it says what it would copy; with it the skills land (not-offered ones said so); a changed
    skill is replaced only on a typed yes, and kept on no or no answer."""
    fake_llm.responder = attributing_responder
    env = env_for(fake_llm, tmp_path)
    instance = workspace_with_skills(tmp_path, nanobot_wheel)
    source = str(instance / SESSION)
    code, out, err = await tusk_cli("import", source, "--format", "nanobot", env=env)
    assert code == 0, err
    assert "skill cron: would be copied into $TUSK_HOME/skills" in out
    assert not (tmp_path / "data" / "skills").exists()
    code, out, err = await tusk_cli("import", source, "--format", "nanobot", "--yes", env=env)
    assert code == 0, err
    home_skills = tmp_path / "data" / "skills"
    assert sorted(p.name for p in home_skills.iterdir()) == sorted([*OFFERED, *NEEDS])
    assert (home_skills / "tmux/scripts/find-sessions.sh").read_bytes() == \
        (instance / "workspace/skills/tmux/scripts/find-sessions.sh").read_bytes()
    assert "skill cron: copied into $TUSK_HOME/skills\n" in out
    assert ("skill github: copied into $TUSK_HOME/skills; not offered: it needs the program gh "
            "(metadata.nanobot.requires.bins), and Tusk runs no programs") in out
    (instance / "workspace/skills/cron/SKILL.md").write_text(
        "---\nname: cron\ndescription: nanobot's edited cron.\n---\nEdited.\n")
    ours = (home_skills / "cron/SKILL.md").read_text()
    for answer in (b"n\n", b""):
        code, out, err = await tusk_cli("import", source, "--format", "nanobot", "--yes", env=env, stdin=answer)
        assert code == 0, err
        assert "Replace the skill cron in" in out and "skill cron: kept the one in $TUSK_HOME/skills" in out
        assert "skill memory: already in $TUSK_HOME/skills" in out
        assert (home_skills / "cron/SKILL.md").read_text() == ours
    code, out, err = await tusk_cli("import", source, "--format", "nanobot", "--yes", env=env, stdin=b"y\n")
    assert code == 0, err
    assert "skill cron: replaced in $TUSK_HOME/skills" in out
    assert (home_skills / "cron/SKILL.md").read_text().endswith("Edited.\n")
    assert not [p for p in home_skills.iterdir() if p.name.startswith(".")]
