"""Skills: playbooks the owner drops in as folders, listed in the prompt, read by the model when needed.

    skill.py     one SKILL.md read and checked (the Agent Skills format; PyYAML's safe loader)
    metadata.py  nanobot's and OpenClaw's extensions: `always`, and what a skill needs that Tusk cannot give
    catalog.py   the skill roots ($TUSK_HOME/skills, ~/.agents/skills, TUSK_SKILLS_DIRS), re-read on change
    config.py    the settings slice; which chats get which skills (TUSK_SKILLS_CHATS, TUSK_SKILLS_GROUPS)
    prompt.py    the system prompt's Skills section within TUSK_SKILLS_MAX_TOKENS
    read.py      what read_skill returns: the body or one file of the folder, framed, capped, never outside it
    chats.py     SkillTools: the section and read_skill in the turns of the chats that have skills
    views.py     `tusk skills list`, `tusk doctor`, the console's /api/skills, the /skills command
    cli.py       the `tusk skills` command
    importer.py  `tusk import --format nanobot` bringing a workspace's skills/ folder

Skills are the owner's instructions, like SOUL.md: nothing the model or a chat member does writes them.
"""
