"""The model's tools: the tool box (box.py) and the tools themselves, each beside what it serves."""
