"""The web tools: `web_fetch` (fetch.py) and `web_search` (search.py), behind the network guard (guard.py)."""
