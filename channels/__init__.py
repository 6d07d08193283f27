"""Where messages come in and replies go out: one adapter per platform (telegram/, discord_bot/, slack/), the
owner's own local ways in (terminal/, http/ with the web console in console/), the contract they all keep
(base.py) and the one intake chain every platform adapter feeds (intake.py)."""
