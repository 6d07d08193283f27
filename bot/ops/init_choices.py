"""What `tusk init` offers and asks for: the model providers, the platforms and their tokens, the secrets.

Read by the flags (bot/ops/init.py), the questions (bot/ops/init_ask.py) and the masking of what the
checks print (bot/ops/init_checks.py `show`).
"""

from __future__ import annotations

from dataclasses import dataclass

SECRET_FLAGS = {"api_key": "TUSK_API_KEY", "telegram_token": "TELEGRAM_BOT_TOKEN", "discord_token": "DISCORD_BOT_TOKEN",
                "slack_bot_token": "SLACK_BOT_TOKEN", "slack_app_token": "SLACK_APP_TOKEN"}
PLATFORMS = {"Telegram": ("TELEGRAM_BOT_TOKEN",), "Discord": ("DISCORD_BOT_TOKEN",),
             "Slack": ("SLACK_BOT_TOKEN", "SLACK_APP_TOKEN")}


@dataclass(frozen=True, slots=True)
class Provider:
    key: str  # the --provider name
    name: str
    model: str  # the suggested litellm model string
    api_base: str = ""  # servers on a URL (local ones)
    key_from: str = ""  # where a key is made; "" for servers that need none


PROVIDERS = (
    Provider("openai", "OpenAI", "openai/gpt-4o-mini", key_from="https://platform.openai.com/api-keys"),
    Provider("anthropic", "Anthropic", "anthropic/claude-3-5-haiku-latest",
             key_from="https://console.anthropic.com/settings/keys"),
    Provider("openrouter", "OpenRouter", "openrouter/openai/gpt-4o-mini", key_from="https://openrouter.ai/keys"),
    Provider("deepseek", "DeepSeek", "deepseek/deepseek-chat", key_from="https://platform.deepseek.com/api_keys"),
    Provider("groq", "Groq", "groq/llama-3.1-8b-instant", key_from="https://console.groq.com/keys"),
    Provider("ollama", "Ollama (on this machine or a URL)", "ollama_chat/llama3.1", "http://localhost:11434"),
    Provider("lmstudio", "LM Studio", "openai/", "http://localhost:1234/v1"),
    Provider("vllm", "vLLM", "hosted_vllm/", "http://localhost:8000/v1"),
    Provider("other", "Other: any litellm model string, any OpenAI-compatible URL", ""),
)
BY_KEY = {p.key: p for p in PROVIDERS}
