"""Prometheus metrics: what `GET /metrics` shows (channels/http/metrics_route.py), from the official prometheus_client.

    tusk_turns_total{channel,outcome}                  turns answered: ok, stopped (/stop), spend_limit, ...
    tusk_first_text_seconds{channel}                   time to the first visible text of a reply (histogram;
                                                       a reply not streamed shows all at once: its full time)
    tusk_reply_seconds{channel}                        time to the full reply (histogram)
    tusk_llm_calls_total{purpose,model}                model calls (reply, consolidation, vision, ...)
    tusk_llm_call_seconds{purpose,model}               their latency (histogram)
    tusk_llm_errors_total{model,error}                 calls that failed, by Tusk's error class
    tusk_llm_tokens_total{model,direction}             input and output tokens (the usage meter's figures)
    tusk_llm_cost_usd_total{model}                     their cost, where a price is known
    tusk_consolidations_total{result}                  consolidation rounds: ok, failed
    tusk_queue_depth{channel}, tusk_queue_age_seconds{channel}   messages waiting for their turn, oldest's age
    tusk_pairing_codes_issued_total{channel}           pairing codes handed out
    tusk_flood_refusals_total{channel,limit}           messages refused by the flood limits
    tusk_mcp_calls_total{server,result}                MCP tool calls: ok, error
    tusk_process_info{role,version}                    1, naming this process's role (`tusk run --role`: all,
                                                       ingress, worker) and Tusk's version: several processes
                                                       are told apart by their scrape target, joined on it
    process_*                                          memory, CPU, open files (ProcessCollector)

Labels are channels, models, purposes, outcomes and MCP server names only: never a person's or chat's id, never
a message's text, so the number of series does not grow with the number of chats. Hooks are one call each,
where the event already happens; they do nothing until a `Metrics` is installed (`install`), and the module
imports prometheus_client only then.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from bot.logs import TurnStats

Backlog = Callable[[], Mapping[str, tuple[int, float]]]  # channel -> (messages waiting, the oldest one's age)
Rounds = Callable[[], tuple[int, int]]  # consolidation rounds so far: (ok, failed)
SECONDS = (0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120, 300)


class Metrics:
    def __init__(self, backlog: Backlog = dict, rounds: Rounds = lambda: (0, 0), role: str = "all") -> None:
        from prometheus_client import CollectorRegistry, Counter, Histogram, Info, ProcessCollector

        from bot.version import installed

        self.registry = r = CollectorRegistry()
        Info("tusk_process", "This process's role and Tusk's version", registry=r).info(
            {"role": role, "version": installed()})
        self.turns = Counter("tusk_turns", "Turns answered, by outcome", ["channel", "outcome"], registry=r)
        self.first_text = Histogram("tusk_first_text_seconds", "Time to the first visible text of a reply",
                                    ["channel"], buckets=SECONDS, registry=r)
        self.reply = Histogram("tusk_reply_seconds", "Time to the full reply", ["channel"], buckets=SECONDS,
                               registry=r)
        self.llm_calls = Counter("tusk_llm_calls", "Model calls", ["purpose", "model"], registry=r)
        self.llm_seconds = Histogram("tusk_llm_call_seconds", "Model call latency", ["purpose", "model"],
                                     buckets=SECONDS, registry=r)
        self.llm_errors = Counter("tusk_llm_errors", "Model calls that failed", ["model", "error"], registry=r)
        self.tokens = Counter("tusk_llm_tokens", "Tokens of model calls", ["model", "direction"], registry=r)
        self.cost = Counter("tusk_llm_cost_usd", "Cost of model calls, where a price is known", ["model"],
                            registry=r)
        self.pairing = Counter("tusk_pairing_codes_issued", "Pairing codes issued", ["channel"], registry=r)
        self.flood = Counter("tusk_flood_refusals", "Messages refused by the flood limits", ["channel", "limit"],
                             registry=r)
        self.mcp = Counter("tusk_mcp_calls", "MCP tool calls", ["server", "result"], registry=r)
        ProcessCollector(registry=r)
        r.register(_Polled(backlog, rounds))

    def render(self) -> bytes:
        from prometheus_client import generate_latest

        return generate_latest(self.registry)


class _Polled:
    """What is read when scraped, not counted as it happens: queues, consolidation rounds."""

    def __init__(self, backlog: Backlog, rounds: Rounds) -> None:
        self.backlog, self.rounds = backlog, rounds

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        depth = GaugeMetricFamily("tusk_queue_depth", "Messages waiting for their turn", labels=["channel"])
        age = GaugeMetricFamily("tusk_queue_age_seconds", "Age of the oldest queued message", labels=["channel"])
        for channel, (n, oldest) in sorted(self.backlog().items()):
            depth.add_metric([channel], n)
            age.add_metric([channel], oldest)
        rounds = CounterMetricFamily("tusk_consolidations", "Consolidation rounds", labels=["result"])
        ok, failed = self.rounds()
        rounds.add_metric(["ok"], ok)
        rounds.add_metric(["failed"], failed)
        yield from (depth, age, rounds)


_current: Metrics | None = None


def install(metrics: Metrics | None) -> None:
    """Make `metrics` the one the hooks count into (None: they do nothing)."""
    global _current
    _current = metrics


def turn_done(channel: str, stats: TurnStats) -> None:
    if (m := _current) is None:
        return
    total = time.monotonic() - stats.started
    m.turns.labels(channel, stats.outcome).inc()
    m.reply.labels(channel).observe(total)
    first = stats.first_text_ms / 1000 if stats.first_text_ms is not None else total
    m.first_text.labels(channel).observe(first)


def llm_call(purpose: str, model: str, input_tokens: int, output_tokens: int, cost_usd: float | None,
             seconds: float) -> None:
    if (m := _current) is None:
        return
    m.llm_calls.labels(purpose, model).inc()
    m.llm_seconds.labels(purpose, model).observe(seconds)
    m.tokens.labels(model, "input").inc(input_tokens)
    m.tokens.labels(model, "output").inc(output_tokens)
    if cost_usd:
        m.cost.labels(model).inc(cost_usd)


def llm_error(model: str, exc: BaseException) -> None:
    if (m := _current) is not None:
        m.llm_errors.labels(model, type(exc).__name__).inc()


def pairing_code(channel: str) -> None:
    if (m := _current) is not None:
        m.pairing.labels(channel).inc()


def flood_refusal(channel: str, limit: str) -> None:
    if (m := _current) is not None:
        m.flood.labels(channel, limit).inc()


def mcp_call(server: str, ok: bool) -> None:
    if (m := _current) is not None:
        m.mcp.labels(server, "ok" if ok else "error").inc()
