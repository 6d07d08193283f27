"""The settings of the model and what it is asked: its calls, the memory it keeps, a turn's tool loop, spend.
Concerns of `bot.config.Settings` (a method may read another concern's setting: every Settings has it)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, SecretStr

from bot.agent import AgentSettings
from bot.config.fields import CommaList, OrUnset, env
from bot.errors import ConfigError
from bot.llm import LLMSettings
from bot.stream import StreamSettings
from bot.usage.limits import LimitSettings
from bot.usage.prices import ModelChoice, parse_models
from memory.chat_settings import zone

MODEL_HINT = ("set it to a litellm model string such as openai/gpt-4o-mini, anthropic/claude-3-5-haiku-latest"
              " or ollama/llama3.1")


class LlmConfig(BaseModel):
    """The model (bot/llm/): which one, where, how its calls are retried; the models a chat may pick."""
    model: OrUnset[str] = env("TUSK_MODEL", None)
    api_base: OrUnset[str] = env("TUSK_API_BASE", None)
    api_key: OrUnset[SecretStr] = env("TUSK_API_KEY", None)
    fallback_models: CommaList = env("TUSK_FALLBACK_MODELS", ())
    llm_timeout: float = env("TUSK_LLM_TIMEOUT", 120.0, gt=0)
    llm_retries: int = env("TUSK_LLM_RETRIES", 3, ge=0, le=10)
    llm_backoff: float = env("TUSK_LLM_BACKOFF", 1.0, ge=0)
    max_reply_tokens: OrUnset[int] = env("TUSK_MAX_REPLY_TOKENS", None, gt=0)
    thinking_budget: OrUnset[int] = env("TUSK_THINKING_BUDGET", None, ge=1024)  # Anthropic extended thinking
    model_slots: OrUnset[int] = env("TUSK_MODEL_SLOTS", None, ge=1)  # requests the server answers at once
    llm_client: str = env("TUSK_LLM_CLIENT", "direct", pattern=r"^(direct|litellm)$")  # the OpenAI wire's client
    models: str = env("TUSK_MODELS", "")  # label=model[@IN/OUT],...: the models a chat may pick (bot/usage/prices.py)

    def llm_settings(self) -> LLMSettings:
        if not self.model:
            raise ConfigError(f"TUSK_MODEL is not set: run `tusk init` to set Tusk up (it asks for the model and "
                              f"its key, and checks them), or {MODEL_HINT}.")
        return LLMSettings(
            model=self.model, api_base=self.api_base,
            api_key=self.api_key.get_secret_value() if self.api_key else None,
            fallbacks=self.fallback_models, timeout=self.llm_timeout, retries=self.llm_retries,
            backoff=self.llm_backoff, max_tokens=self.max_reply_tokens,
            thinking_budget=self.thinking_budget, slots=self.model_slots, direct=self.llm_client == "direct",
        )

    def model_choices(self) -> dict[str, ModelChoice]:
        """TUSK_MODELS read: label -> model (and its price, where given)."""
        try:
            return parse_models(self.models)
        except ValueError as exc:
            raise ConfigError(f"TUSK_MODELS: {exc}. Write it as label=model pairs separated by commas, a price "
                              "in USD per million input/output tokens after @: fast=openai/gpt-4o-mini,"
                              "local=openai/tiny@0/0") from exc


class MemoryConfig(BaseModel):
    """What a chat keeps (memory/): the window it is fitted to, consolidation, /persona, sweeps, backups."""
    consolidation_model: OrUnset[str] = env("TUSK_CONSOLIDATION_MODEL", None)
    context_window: OrUnset[int] = env("TUSK_CONTEXT_WINDOW", None, ge=1024)
    memory_max_tokens: OrUnset[int] = env("TUSK_MEMORY_MAX_TOKENS", None, ge=100)
    persona_max_tokens: int = env("TUSK_PERSONA_MAX_TOKENS", 500, ge=20, le=8000)  # a chat's /persona
    memory_notices: bool = env("TUSK_MEMORY_NOTICES", True)
    consolidate_every: float = env("TUSK_CONSOLIDATE_EVERY", 10.0, gt=0)
    backup_dir: OrUnset[Path] = env("TUSK_BACKUP_DIR", None)  # daily `tusk backup` into it (bot/ops/backup.py)
    backup_keep: int = env("TUSK_BACKUP_KEEP", 7, ge=1)


class LimitsConfig(BaseModel):
    """Spend limits (bot/usage/limits.py): owner-wide, per chat, per person; days end at TUSK_TIMEZONE's midnight."""
    if TYPE_CHECKING:  # other concerns' settings, read here (Settings has them all)
        timezone: str  # TUSK_TIMEZONE (Settings)

    limit_daily_usd: OrUnset[float] = env("TUSK_LIMIT_DAILY_USD", None, ge=0)
    limit_monthly_usd: OrUnset[float] = env("TUSK_LIMIT_MONTHLY_USD", None, ge=0)
    chat_limit_daily_usd: OrUnset[float] = env("TUSK_CHAT_LIMIT_DAILY_USD", None, ge=0)
    person_limit_daily_usd: OrUnset[float] = env("TUSK_PERSON_LIMIT_DAILY_USD", None, ge=0)
    limit_daily_tokens: OrUnset[int] = env("TUSK_LIMIT_DAILY_TOKENS", None, ge=0)  # models with no known price
    chat_limit_daily_tokens: OrUnset[int] = env("TUSK_CHAT_LIMIT_DAILY_TOKENS", None, ge=0)

    def limit_settings(self) -> LimitSettings:
        return LimitSettings(daily_usd=self.limit_daily_usd, monthly_usd=self.limit_monthly_usd,
                             chat_daily_usd=self.chat_limit_daily_usd, person_daily_usd=self.person_limit_daily_usd,
                             daily_tokens=self.limit_daily_tokens, chat_daily_tokens=self.chat_limit_daily_tokens,
                             zone=zone(self.timezone))


class TurnsConfig(BaseModel):
    """A turn (bot/agent.py): its tool loop, the sizes it takes, its reply streamed (bot/stream.py)."""
    if TYPE_CHECKING:  # other concerns' settings, read here (Settings has them all)
        model: str | None  # TUSK_MODEL (LlmConfig)
        log_content: bool  # TUSK_LOG_CONTENT (Settings)

    max_tool_iterations: int = env("TUSK_MAX_TOOL_ITERATIONS", 20, ge=1, le=100)
    tool_result_max_chars: int = env("TUSK_TOOL_RESULT_MAX_CHARS", 16_000, ge=100)
    max_message_chars: int = env("TUSK_MAX_MESSAGE_CHARS", 32_000, ge=100)
    stream: Literal["auto", "off"] = env("TUSK_STREAM", "auto")
    stream_min_chars: int = env("TUSK_STREAM_MIN_CHARS", 120, ge=0, le=4000)

    def agent_settings(self) -> AgentSettings:
        return AgentSettings(model=self.model or "", max_tool_iterations=self.max_tool_iterations,
                             tool_result_max_chars=self.tool_result_max_chars,
                             max_message_chars=self.max_message_chars, log_content=self.log_content)

    def stream_settings(self) -> StreamSettings:
        return StreamSettings(self.stream, self.stream_min_chars)
