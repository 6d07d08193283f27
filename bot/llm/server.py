"""Small JSON questions to the model's server, over aiohttp: what models it serves, what window it runs.

    served_models(api_base)   the ids it lists at /v1/models, else the names at Ollama's /api/tags
    served_slots(api_base)    how many requests it answers at once, where it says: llama.cpp's /props
                              `total_slots` (bot/llm/slots.py)
    ModelServer               one short session for such questions: bot/llm/window.py asks vLLM's /v1/models,
                              LM Studio's /api/v0/models/<name>, Ollama's /api/show and llama.cpp's /props

A question that gets no answer within the timeout (3 s), an answer other than 200, or one that is not
JSON, is answered None: never an exception. aiohttp is imported on first use: a terminal chat starts
without it.
"""

from __future__ import annotations

from typing import Any


def server_root(api_base: str) -> str:
    """A server's root URL from an OpenAI-style base URL (`http://host:11434/v1` -> `http://host:11434`)."""
    return api_base.rstrip("/").removesuffix("/v1")


class ModelServer:
    """`async with ModelServer(api_base, api_key) as server: await server.ask("/props")`."""

    def __init__(self, api_base: str, api_key: str | None = None, timeout: float = 3.0) -> None:
        self.root = server_root(api_base)
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._timeout = timeout
        self._http: Any = None

    async def __aenter__(self) -> ModelServer:
        import aiohttp  # here: a terminal chat starts without it

        self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self._timeout), headers=self._headers)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._http.close()

    async def ask(self, path: str, body: dict[str, Any] | None = None) -> Any:
        """The JSON the server answers at `path` (a POST of `body` when given, else a GET), or None."""
        import aiohttp

        try:
            async with self._http.request("GET" if body is None else "POST", self.root + path, json=body) as resp:
                if resp.status != 200:
                    return None
                return await resp.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, ValueError):
            return None


async def served_models(api_base: str) -> list[str]:
    """The model ids a server lists at /v1/models (Ollama's /api/tags too), or [] if it lists none."""
    async with ModelServer(api_base) as server:
        for path, key, field in (("/v1/models", "data", "id"), ("/api/tags", "models", "name")):
            body = await server.ask(path)
            names = [m.get(field) for m in (body.get(key) if isinstance(body, dict) else None) or []
                     if isinstance(m, dict)]
            if names:
                return [str(n) for n in names]
    return []


async def served_slots(api_base: str, api_key: str | None = None) -> int | None:
    """The requests the server answers at once, as llama.cpp's server says at /props (`total_slots`), or None."""
    async with ModelServer(api_base, api_key) as server:
        props = await server.ask("/props")
    slots = props.get("total_slots") if isinstance(props, dict) else None
    return slots if isinstance(slots, int) and not isinstance(slots, bool) and slots > 0 else None
