"""The LLM boundary: litellm in, Tusk's own types and errors out; what the model's server is and can do.

    client.py     `LLM` and its `LLMSettings`: one chat request, retried, then each fallback model
    direct.py     the OpenAI wire without litellm (aiohttp): `openai/` requests, from the first second after a
                  start, sent and read as litellm would (`WireError` for what went wrong)
    slots.py      replies before housekeeping on a server that answers one request at a time (`Slots`,
                  `housekeeping()`, `Preempted`)
    catalog.py    litellm's bundled model list read without importing litellm: windows, largest replies, prices
    reply.py      a provider's reply read into `LLMReply` and its `ToolCall`s (`parse`): ids, repaired names
                  and arguments, no `<think>` text, reasoning kept apart, why it finished
    streams.py    a model's stream read back into one reply (`Assembly`, `collect`), feeding who watches it;
                  `StreamEmpty` (asked again whole) and `StreamCut` (part of it was shown: not retried)
    translate.py  litellm's exceptions as Tusk's (bot/errors.py): what may be retried, what may not
    wire.py       what real servers send, read before and beside litellm: window errors and their sizes,
                  refused tools, unknown models, web pages, no connection; `<think>`; what Anthropic's and
                  Gemini's routes need of a request
    readable.py   an httpx transport for OpenAI-compatible servers (vLLM, LM Studio, llama.cpp, a proxy) that
                  hands their replies to litellm in shapes it reads; imported only when such a client is made
    shapes.py     those shapes made readable (pure JSON work), for readable.py and direct.py alike
    server.py     small JSON questions to the model's server over aiohttp (`ModelServer`): the models it
                  serves, what its window is
    window.py     the model's real window, and where that figure came from (configured, learned, litellm's
                  list, the server asked at start, the default); the reply's cap; the step down on overflow
    profile.py    `ModelProfile`: what Tusk knows of the model now (window and budget, tools, streaming, cut
                  prompts, price), read by all and written only here, as a server teaches it (client.py, warmup.py)
    learned.py    what a model's server taught Tusk, kept in $TUSK_HOME/models.json (`ModelBook`)
    loader.py     litellm imported on first use or in a background thread; its model list's window and
                  largest reply for a model
    warmup.py     what a running Tusk loads once it is up: the tokenizer and the model's window (turns go from
                  there), the server's slots, then litellm

Callers import from here: `from bot.llm import LLM, LLMSettings, ...`; the modules inside import each
other, never this file. Importing the package imports neither litellm, nor httpx, nor aiohttp: each waits
for its first use (tests/test_startup.py).
"""

from bot.llm.client import LLM, LLMSettings
from bot.llm.loader import litellm, litellm_loaded, load_litellm, model_max_output, model_window
from bot.llm.reply import LLMReply, ToolCall

__all__ = ["LLM", "LLMReply", "LLMSettings", "ToolCall", "litellm", "litellm_loaded", "load_litellm",
           "model_max_output", "model_window"]
