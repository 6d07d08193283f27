"""SIGKILL at random points during turns and consolidation: the chat loads, nothing acknowledged is lost,
MEMORY.md is never half-written."""

import asyncio
import random
import re
import signal
from collections import Counter

import aiohttp

from bot.usage.ledger import Ledger
from memory import files as memfiles
from memory.paths import ChatFiles
from memory.session import iter_messages, load
from tests import procs
from tests.fakes.fake_llm import Reply, prompt_tokens
from tests.test_cli import api_from, env_for

FILLER = " ".join(f"word{i}" for i in range(60))
MEMORY = re.compile(r"(- fact \d+ " + re.escape(FILLER) + r"\n)+")


async def test_sigkill_anywhere_loses_nothing_acknowledged(fake_llm, tmp_path):
    """Three runs killed mid-work; every acknowledged message survives and MEMORY.md is always whole."""
    rounds = {"n": 0}

    def respond(body):
        if any(t["function"]["name"] == "save_memory" for t in body.get("tools") or []):
            rounds["n"] += 1
            memory = "".join(f"- fact {i} {FILLER}\n" for i in range(rounds["n"] % 4 + 1))
            return Reply(text=None, delay=random.uniform(0, 0.05),
                         tool_calls=[("s", "save_memory", {"history_entry": f"round {rounds['n']}",
                                                           "memory_update": memory})])
        return Reply(text=f"ok {FILLER}", delay=random.uniform(0, 0.05))

    fake_llm.responder = respond
    random.seed(7)
    env = env_for(fake_llm, tmp_path, TUSK_HTTP_PORT="0", TUSK_CONTEXT_WINDOW="2048")
    acknowledged: list[str] = []
    files = ChatFiles.locate(tmp_path / "data", "http", "crash")
    for run in range(3):
        proc = await procs.start_tusk("run", env=env,
                                      stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
        line = (await asyncio.wait_for(proc.stdout.readline(), timeout=60)).decode()
        base, headers = api_from(line, tmp_path / "data")
        url = base + "/v1/chats/crash/messages"
        kill_after = random.uniform(0.5, 2.0)

        async def talk():
            async with aiohttp.ClientSession(headers=headers) as client:
                for i in range(1000):
                    text = f"run {run} message {i} {FILLER}"
                    async with client.post(url, json={"text": text}) as resp:
                        if resp.status == 200:
                            acknowledged.append(text)

        talker = asyncio.create_task(talk())
        before = len(acknowledged)
        # wait for work, not for time: this run has an acknowledged message (the last run also a consolidation)
        while (len(acknowledged) == before or (run == 2 and rounds["n"] == 0)) and not talker.done():
            await asyncio.sleep(0.01)
        assert not talker.done(), talker
        await asyncio.sleep(kill_after)
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
        talker.cancel()
        await asyncio.gather(talker, return_exceptions=True)

        session = load(files, "http", "crash")  # must load after every kill
        saved = {m.content for m in iter_messages(files) if m.role == "user"}
        assert [t for t in acknowledged if t not in saved] == []
        assert session.last_consolidated <= session.total
        memory = memfiles.read_memory(files)
        assert memory == "" or MEMORY.fullmatch(memory), memory[:200]
    assert {int(t.split()[1]) for t in acknowledged} == {0, 1, 2} and rounds["n"] > 0  # every run was killed mid-work
    # the usage ledger survived the kills: each call recorded with the figures the provider reported, at most
    # the one in flight at each kill lost
    reported = Counter((prompt_tokens(b), len(_answer(b)) // 4 + 1) for b in fake_llm.requests)
    ledger = Ledger(tmp_path / "data")
    recorded = Counter((r[0], r[1]) for r in ledger._rows("SELECT input_tokens, output_tokens FROM calls", []))
    ledger.close()
    assert not recorded - reported and sum((reported - recorded).values()) <= 3
    assert sum(recorded.values()) >= len(acknowledged)


def _answer(body):
    """The text the fake answered `body` with (its usage counts len(text) // 4 + 1 completion tokens)."""
    if any(t["function"]["name"] == "save_memory" for t in body.get("tools") or []):
        return ""
    return f"ok {FILLER}"
