"""What a request's reservation counts (bot/usage/estimate.py): every message, images as billed, tool schemas."""

import base64
import json

from bot.usage.estimate import MAX_RATIO, TOOLS_PREAMBLE, RequestEstimate
from memory.tokens import IMAGE_TOKENS, count_text

TOOL = {"type": "function", "function": {"name": "current_time", "description": "The current date and time.",
                                         "parameters": {"type": "object", "properties": {}}}}


def test_an_image_counts_as_a_provider_bills_it_not_as_its_base64():
    """A 300 KB image part adds the fixed image estimate, not the ~100,000 tokens of its encoded bytes."""
    url = "data:image/png;base64," + base64.b64encode(bytes(300_000)).decode()
    text = {"role": "user", "content": [{"type": "text", "text": "what is this?"}]}
    seen = {"role": "user", "content": [*text["content"], {"type": "image_url", "image_url": {"url": url}}]}
    estimate = RequestEstimate()
    assert IMAGE_TOKENS <= estimate.counted([seen]) - estimate.counted([text]) <= IMAGE_TOKENS + 10


def test_tool_schemas_count_with_the_templates_preamble():
    """Offering a tool adds at least its schema's tokens and the preamble a provider writes around schemas."""
    messages = [{"role": "system", "content": "You are Tusk."}, {"role": "user", "content": "time?"}]
    estimate = RequestEstimate()
    added = estimate.counted(messages, [TOOL]) - estimate.counted(messages)
    assert added >= count_text(json.dumps([TOOL])) + TOOLS_PREAMBLE


def test_a_message_of_rare_words_counts_at_least_a_quarter_of_its_characters():
    """Text a smaller vocabulary splits finely (long numbers) counts at least one token per four characters."""
    digits = "".join(str(i * 7919 % 10) for i in range(8000))
    assert RequestEstimate().counted([{"role": "user", "content": digits}]) >= len(digits) // 4


def test_a_provider_that_bills_more_scales_that_models_later_estimates():
    """After a call billed 30% over Tusk's count, that model's estimates grow by 30% (another model's do not);
    the ratio is capped, and tiny requests teach nothing."""
    estimate = RequestEstimate()
    estimate.learn("m", 1000, 1300)
    estimate.learn("m", 100, 1000)  # too small to say anything about the provider
    assert estimate.scaled("m", 2000) == 2600 and estimate.scaled("other", 2000) == 2000
    estimate.learn("m", 1000, 9000)
    assert estimate.ratio("m") == MAX_RATIO
