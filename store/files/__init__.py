"""The files backend (the default): everything under `$TUSK_HOME`, in the formats docs/data-layout.md
documents, readable in a text editor. One Tusk runs on a home (bot/running.py)."""
