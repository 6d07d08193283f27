"""GET /metrics: Prometheus's text format, read back with prometheus_client's own parser."""

import asyncio
import shutil
import socket
import subprocess

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import running
from tests.fakes.fake_llm import Reply


async def scrape(tusk, headers=None):
    async with aiohttp.ClientSession() as plain:
        async with plain.get(tusk.url + "/metrics", headers=headers) as resp:
            return resp.status, await resp.text()


def samples(text):
    return [s for family in text_string_to_metric_families(text) for s in family.samples]


def value(text, name, **labels):
    return sum(s.value for s in samples(text) if s.name == name and labels.items() <= s.labels.items())


async def test_turns_llm_calls_tokens_and_process_are_counted(tusk, fake_llm):
    """After two turns: turns by outcome, reply-time histograms, LLM calls and tokens by model, process figures."""
    await tusk.say("secret-chat-id", "a private sentence")
    fake_llm.script(Reply(status=503))
    await tusk.say("secret-chat-id", "another")
    status, text = await scrape(tusk, {"Authorization": f"Bearer {tusk.token}"})
    assert status == 200
    assert value(text, "tusk_turns_total", channel="http", outcome="ok") == 1
    assert value(text, "tusk_turns_total", channel="http", outcome="llm_unavailable") == 1
    assert value(text, "tusk_reply_seconds_count", channel="http") == 2
    assert value(text, "tusk_first_text_seconds_count", channel="http") == 2
    assert value(text, "tusk_llm_calls_total", purpose="reply", model="openai/fake-model") == 1
    assert value(text, "tusk_llm_tokens_total", direction="input") > 0
    assert value(text, "tusk_llm_errors_total", model="openai/fake-model") >= 1
    assert value(text, "process_resident_memory_bytes") > 0
    assert value(text, "tusk_consolidations_total", result="failed") == 0
    labels = {v for s in samples(text) for v in s.labels.values()}
    assert not any("secret" in v or "private" in v for v in labels)


async def test_metrics_name_the_process_role_and_version(tusk):
    """/metrics carries tusk_process_info{role,version} = 1: a lone `tusk run` is role "all"; a process made
    for another role says that role, and the existing names keep theirs."""
    from bot.metrics import Metrics
    from bot.version import installed

    status, text = await scrape(tusk, {"Authorization": f"Bearer {tusk.token}"})
    [info] = [s for s in samples(text) if s.name == "tusk_process_info"]
    assert status == 200 and info.labels == {"role": "all", "version": installed()} and info.value == 1
    worker = Metrics(role="worker").render().decode()
    assert [s.labels["role"] for s in samples(worker) if s.name == "tusk_process_info"] == ["worker"]
    assert "tusk_queue_depth" in worker and "tusk_consolidations_total" in worker


async def test_metrics_need_the_token_unless_open(make_settings):
    """By default /metrics is behind the token; TUSK_METRICS=open answers a loopback peer without it."""
    async with running(make_settings()) as tusk:
        assert (await scrape(tusk))[0] == 401
    async with running(make_settings(TUSK_METRICS="open")) as tusk:
        status, text = await scrape(tusk)
        assert status == 200 and "tusk_turns" in text


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def test_a_prometheus_server_scrapes_tusk(tusk, tmp_path):
    """Debian's prometheus scrapes /metrics with the bearer token: the target is up and Tusk's series arrive."""
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.skip("the prometheus server is not installed (apt-get install prometheus)")
    (tmp_path / "token").write_text(tusk.token)
    (tmp_path / "prometheus.yml").write_text(f"""
global: {{scrape_interval: 1s}}
scrape_configs:
  - job_name: tusk
    authorization: {{credentials_file: {tmp_path / 'token'}}}
    static_configs: [{{targets: ['{tusk.url.removeprefix("http://")}']}}]
""")
    port = free_port()
    proc = subprocess.Popen([binary, f"--config.file={tmp_path / 'prometheus.yml'}",
                             f"--storage.tsdb.path={tmp_path / 'tsdb'}", f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    query = f"http://127.0.0.1:{port}/api/v1/query"
    found = []
    try:
        async with aiohttp.ClientSession() as client:
            for _ in range(300):
                await asyncio.sleep(0.1)
                try:
                    async with client.get(query, params={"query": 'up{job="tusk"} and on() process_open_fds'}) as r:
                        found = (await r.json())["data"]["result"]
                except (aiohttp.ClientError, KeyError):
                    continue
                if found:
                    break
    finally:
        proc.terminate()
        proc.wait(10)
    assert found and found[0]["value"][1] == "1"
