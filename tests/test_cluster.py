"""Several Tusk processes on one real PostgreSQL (bot/cluster/): 2 ingress and 3 workers behind the HTTP API,
30 chats talking at once through both ingress, workers killed and started again, another paused past its
heartbeat and resumed, the database restarted: every message answered once and stored once, in order.
/stop across processes, 503 while the database is down, Telegram's long polling moving to another ingress,
a reminder firing once across two workers."""

import asyncio
import json
import re
import signal
import time
import uuid

import aiohttp
import psycopg

from tests import procs
from tests.conftest import migrated
from tests.fakes.fake_llm import Reply, last_user_text
from tests.test_cli import env_for

CHATS, MESSAGES = 30, 2  # chats talking at once; messages each sends at least (more while the trouble lasts)
PACE = 3.0  # seconds between a chat's answer and its next message
TOKEN = re.compile(r"\b(c\d+m\d+)\b")
DEADLINE = 150  # seconds a message may take, retries included (a dead worker's turn waits ~15 s to run again)


def answering(fake_llm):
    """Replies naming the message they answer, after 0.3 s (a model's pace)."""
    def respond(body):
        found = TOKEN.findall(last_user_text(body))
        return Reply(text=f"ok {found[-1] if found else '?'}", delay=0.3)
    fake_llm.responder = respond


async def start_role(fake_llm, tmp_path, url, role, n, **extra):
    env = env_for(fake_llm, tmp_path / f"{role}{n}", TUSK_HTTP_PORT="0", TUSK_DATABASE_URL=url,
                  TUSK_HTTP_TOKEN="cluster-token", **{"TUSK_LOG_LEVEL": "warning", **extra})
    out, err = tmp_path / f"{role}{n}.out", tmp_path / f"{role}{n}.log"
    with open(out, "wb") as stdout, open(err, "wb") as stderr:  # the child keeps its own copies
        proc = await procs.start_tusk("run", "--role", role, env=env, stdout=stdout, stderr=stderr)
    await procs_wait(lambda: "Tusk is running" in out.read_text() or proc.returncode is not None, 120)
    line = out.read_text()
    assert "Tusk is running" in line, (line, err.read_text())
    return proc, re.search(r"http://[^\s/#]+", line)[0]


async def ask(session, bases, chat, text, start):
    """POST the message with one Idempotency-Key, to one ingress then the other, until answered (200)."""
    key, i = str(uuid.uuid4()), start
    deadline = asyncio.get_running_loop().time() + DEADLINE
    while asyncio.get_running_loop().time() < deadline:
        base = bases[i % len(bases)]
        i += 1
        try:
            async with session.post(f"{base}/v1/chats/{chat}/messages", json={"text": text},
                                    headers={"Authorization": "Bearer cluster-token", "Origin": base,
                                             "Idempotency-Key": key},
                                    timeout=aiohttp.ClientTimeout(total=DEADLINE)) as resp:
                if resp.status == 200:
                    return (await resp.json())["replies"]
        except (aiohttp.ClientError, TimeoutError):
            pass
        await asyncio.sleep(0.5)
    raise AssertionError(f"{chat}: {text!r} not answered in {DEADLINE} s")


def stored(url, chat, channel="http"):
    """The chat's session messages in the database, in order: (role, content)."""
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT s.line FROM session_lines s JOIN chats c ON c.id = s.chat WHERE c.channel = "
                            "%s AND c.chat_id = %s AND s.seq IS NOT NULL ORDER BY s.seq", (channel, chat)).fetchall()
    return [(m["role"], m.get("content")) for m in (json.loads(line) for (line,) in rows)]


async def test_chats_through_two_ingress_survive_dead_workers_and_a_database_restart(fake_llm, pg_server, pg_url,
                                                                                     tmp_path):
    """30 chats talking at once through 2 ingress and 3 workers, until the trouble is over: a worker killed (-9)
    and started again, one paused past its heartbeat and resumed, the database stopped as if it crashed and
    started again, another worker killed: each message answered once with its own reply, stored once, in
    order, and nothing is left queued."""
    answering(fake_llm)
    migrated(pg_url)
    ingress = await asyncio.gather(*(start_role(fake_llm, tmp_path, pg_url, "ingress", n) for n in range(2)))
    workers = list(await asyncio.gather(*(start_role(fake_llm, tmp_path, pg_url, "worker", n) for n in range(3))))
    bases = [base for _, base in ingress]
    sent = [0] * CHATS
    calm = asyncio.Event()

    async def chat(c, session):
        while sent[c] < MESSAGES or not calm.is_set():
            m = sent[c]
            replies = await ask(session, bases, f"c{c}", f"message c{c}m{m} for the cluster", c + m)
            assert replies == [f"ok c{c}m{m}"], (c, m, replies)
            sent[c] += 1
            await asyncio.sleep(PACE)

    async def killed(n, again):
        victim, _ = workers[n]
        victim.send_signal(signal.SIGKILL)  # mid-traffic: its turns run again elsewhere
        await victim.wait()
        workers[n] = await start_role(fake_llm, tmp_path, pg_url, "worker", again)

    async def trouble():
        await procs_wait(lambda: sum(sent) >= CHATS)
        said(f"{sum(sent)} answered; worker 0 killed")
        await killed(0, 3)
        paused, _ = workers[1]
        said(f"{sum(sent)} answered; worker 1 paused")
        paused.send_signal(signal.SIGSTOP)  # past its heartbeat: its turns are taken over
        await asyncio.sleep(18)
        paused.send_signal(signal.SIGCONT)  # it wakes into chats it no longer holds
        said(f"{sum(sent)} answered; worker 1 resumed, the database stopped")
        await asyncio.to_thread(pg_server.stop, "immediate")  # as if it crashed: every connection cut
        await asyncio.sleep(3)
        await asyncio.to_thread(pg_server.start)
        back = sum(sent)
        said(f"{back} answered; the database started again")
        await procs_wait(lambda: sum(sent) >= back + CHATS // 2)  # answers flow again: the next kill hits traffic
        said(f"{sum(sent)} answered; worker 2 killed")
        await killed(2, 4)
        said(f"{sum(sent)} answered; the trouble is over")
        calm.set()

    try:
        async with aiohttp.ClientSession() as session:
            await asyncio.gather(trouble(), *(chat(c, session) for c in range(CHATS)))
    finally:
        pg_server.start()  # (running already unless the trouble failed while it was down)
        await stopped([*ingress, *workers])
    for c in range(CHATS):
        texts = stored(pg_url, f"c{c}")
        users = [t for role, t in texts if role == "user"]
        replies = [t for role, t in texts if role == "assistant"]
        assert [TOKEN.findall(u)[-1] for u in users] == [f"c{c}m{m}" for m in range(sent[c])], (c, texts)
        assert replies == [f"ok c{c}m{m}" for m in range(sent[c])], (c, texts)
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT count(*) FROM inbox").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM procrastinate_jobs WHERE status IN ('todo', 'doing')"
                            ).fetchone()[0] == 0


def said(what):
    """A step of the trouble, timed (a failure's output lines them up with the processes' logs)."""
    print(time.strftime("%H:%M:%S"), what, flush=True)


async def stopped(started):
    """Each process stopped as an operator stops it (SIGTERM, a paused one woken first), and reaped."""
    for proc, _ in started:
        proc.send_signal(signal.SIGCONT)
        proc.send_signal(signal.SIGTERM)
    for proc, _ in started:
        await asyncio.wait_for(proc.wait(), 60)


async def procs_wait(predicate, timeout=DEADLINE):
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "the traffic stalled"
        await asyncio.sleep(0.05)


async def post(session, base, path, body, key=None):
    """(status, JSON body or None) of one POST to an ingress (None for a connection that failed)."""
    headers = {"Authorization": "Bearer cluster-token", "Origin": base, **({"Idempotency-Key": key} if key else {})}
    try:
        async with session.post(f"{base}{path}", json=body, headers=headers,
                                timeout=aiohttp.ClientTimeout(total=60)) as resp:
            return resp.status, await resp.json()
    except (aiohttp.ClientError, TimeoutError):
        return None, None


async def test_a_stop_reaches_the_worker_and_a_request_while_the_database_is_down_gets_503(fake_llm, pg_server,
                                                                                          pg_url, tmp_path):
    """/stop sent to the ingress stops the turn a worker runs (its reply ends in the stop's note); while the
    database is down the ingress answers 503, and the same request (same Idempotency-Key) is answered once
    it is back."""
    migrated(pg_url)
    started = await asyncio.gather(start_role(fake_llm, tmp_path, pg_url, "ingress", 0),
                                   start_role(fake_llm, tmp_path, pg_url, "worker", 0))
    base = started[0][1]
    session = aiohttp.ClientSession()
    try:
        fake_llm.script(Reply(text="a long answer", delay=60))
        asked = asyncio.create_task(post(session, base, "/v1/chats/s/messages", {"text": "tell me everything"}))
        await fake_llm.wait_for_requests(1, timeout=60)
        status, body = await post(session, base, "/v1/chats/s/stop", {})
        assert status == 200 and body["replies"] == [], body  # the stopped reply is the answer, to its request
        status, body = await asyncio.wait_for(asked, 30)
        assert status == 200 and body["replies"] == ["_(stopped)_"], body
        answering(fake_llm)
        key = str(uuid.uuid4())
        await asyncio.to_thread(pg_server.stop)
        try:
            status, body = await post(session, base, "/v1/chats/d/messages", {"text": "while down c9m9"}, key)
            assert status == 503 and "database" in body["error"], body
        finally:
            await asyncio.to_thread(pg_server.start)  # the next tests of this process share the server
        assert await ask_again(session, base, "d", "while down c9m9", key) == ["ok c9m9"]
        assert await ask_again(session, base, "d", "while down c9m9", key) == ["ok c9m9"]  # the first answer
    finally:
        await session.close()
        await stopped(started)
    assert [t for role, t in stored(pg_url, "d") if role == "assistant"] == ["ok c9m9"]


async def ask_again(session, base, chat, text, key):
    """The same request, same key, until it is answered (the database back within the minute)."""
    deadline = asyncio.get_running_loop().time() + 60
    while asyncio.get_running_loop().time() < deadline:
        status, body = await post(session, base, f"/v1/chats/{chat}/messages", {"text": text}, key)
        if status == 200:
            return body["replies"]
        await asyncio.sleep(0.5)
    raise AssertionError(f"{text!r} not answered within a minute of the database coming back")


async def test_telegram_is_polled_by_one_ingress_and_another_takes_over_when_it_dies(fake_llm, pg_url, tmp_path):
    """Two ingress with Telegram's long polling and a worker: one ingress polls at a time (no 409 Conflict),
    the worker sends the replies; when the polling ingress is killed the other polls within 30 s, and every
    message is answered once."""
    from tests.fakes.fake_telegram import FakeTelegram

    answering(fake_llm)
    migrated(pg_url)
    async with FakeTelegram() as tg:
        platform = {"TELEGRAM_BOT_TOKEN": tg.token, "TELEGRAM_API_BASE": tg.base_url, "TELEGRAM_ALLOW_FROM": "7",
                    "TUSK_LOG_LEVEL": "info"}
        started = await asyncio.gather(*(start_role(fake_llm, tmp_path, pg_url, role, n, **platform)
                                         for role, n in (("ingress", 0), ("ingress", 1), ("worker", 0))))

        def replies(token):
            return [m for m in tg.sent if m["method"] == "sendMessage" and m["plain"] == f"ok {token}"]

        try:
            tg.push_message(42, "first c1m0")
            await procs_wait(lambda: replies("c1m0"), 90)
            polling = [n for n in (0, 1)
                       if "holds Telegram's long polling" in (tmp_path / f"ingress{n}.log").read_text()]
            assert len(polling) == 1, polling
            started[polling[0]][0].send_signal(signal.SIGKILL)
            await started[polling[0]][0].wait()
            tg.push_message(42, "second c1m1")
            await procs_wait(lambda: replies("c1m1"), 60)
        finally:
            await stopped([(proc, base) for proc, base in started if proc.returncode is None])
    assert len(replies("c1m0")) == 1 and len(replies("c1m1")) == 1 and tg.conflicts == 0
    assert [TOKEN.findall(t)[-1] for role, t in stored(pg_url, "42", "telegram") if role == "user"] == ["c1m0", "c1m1"]


async def test_a_reminder_set_on_one_worker_fires_once_across_two(fake_llm, pg_url, tmp_path):
    """A reminder set through one worker's turn is seen by both workers (each reads the schedules again), and
    its run is claimed once: one reminder turn in the chat, not two."""
    from tests.schedule_clock import scheduling

    migrated(pg_url)
    started = await asyncio.gather(start_role(fake_llm, tmp_path, pg_url, "ingress", 0),
                                   *(start_role(fake_llm, tmp_path, pg_url, "worker", n) for n in range(2)))
    base = started[0][1]
    session = aiohttp.ClientSession()
    try:
        fake_llm.script(scheduling("drink water r5m5", when="in 25 seconds"), Reply(text="Set."))
        status, body = await post(session, base, "/v1/chats/rem/messages", {"text": "remind me soon"})
        assert status == 200 and body["replies"] == ["Set."], body
        answering(fake_llm)

        def reminded():
            return [t for role, t in stored(pg_url, "rem") if role == "user" and "r5m5" in str(t)]
        await procs_wait(lambda: reminded(), 90)
        status, body = await post(session, base, "/v1/chats/rem/messages", {"text": "after it c5m6"})
        # a sentinel: a second run of the reminder, fired at the same due time, would be queued before this turn
        assert status == 200 and body["replies"] == ["ok c5m6"], body
    finally:
        await session.close()
        await stopped(started)
    assert len(reminded()) == 1, stored(pg_url, "rem")


async def test_results_keys_and_claims_older_than_an_hour_are_pruned(pg_url):
    """`prune` deletes turn results, Idempotency-Keys and turn claims older than an hour, and keeps newer ones
    (a repeat within the hour still gets its first answer)."""
    from bot.cluster.dispatch import prune
    from store.postgres.pool import Database

    migrated(pg_url)
    with psycopg.connect(pg_url) as conn:
        for age, inbox in (("2 hours", 1), ("5 minutes", 2)):
            conn.execute("INSERT INTO turn_results (inbox, channel, chat_id, kind, body, at) VALUES "
                         f"(%s, 'http', 'p', 'done', '{{}}', now() - interval '{age}')", (inbox,))
            conn.execute("INSERT INTO idempotency (channel, chat_id, key, inbox, at) VALUES "
                         f"('http', 'p', %s, %s, now() - interval '{age}')", (f"k{inbox}", inbox))
            conn.execute(f"INSERT INTO turn_claims (inbox, run, at) VALUES (%s, 'r', now() - interval '{age}')",
                         (inbox,))
    db = Database(pg_url)
    await db.open()
    try:
        assert await prune(db) == 1
    finally:
        await db.close()
    with psycopg.connect(pg_url) as conn:
        for table in ("turn_results", "idempotency", "turn_claims"):
            assert conn.execute(f"SELECT inbox FROM {table}").fetchall() == [(2,)], table
