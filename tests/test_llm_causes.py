"""In the owner's channels (the terminal, the console and HTTP API) an LLM failure names its cause class (wrong
key, unreachable URL, unknown model) and points to `tusk doctor`, without secrets or server internals."""

import json
import socket

import httpx

from bot.errors import LLMAuthFailed, LLMError, LLMUnreachable, ModelNotFound
from bot.llm.wire import public_url, unreachable_reason
from tests.conftest import running
from tests.fakes.fake_llm import Reply
from tests.test_cli import env_for, tusk as run_tusk
from tests import kept

SECRET = "sk-test-secret-key"  # the key tests/conftest.py's settings carry


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def test_wrong_key_is_named_in_the_console(make_settings, fake_llm):
    """A 401 from the provider: the console hears 'wrong key' and `tusk doctor`, once, and never the key."""
    fake_llm.api_keys = {"sk-the-right-one"}
    async with running(make_settings()) as tusk:
        (reply,) = await tusk.say("k", "hello")
        assert "wrong key" in reply and "TUSK_API_KEY" in reply and "tusk doctor" in reply
        assert SECRET not in reply and "-key" not in reply and "platform.openai.com" not in reply
        assert len(fake_llm.requests) == 1  # a refused key is not retried
        assert not kept.files(tusk, "http", "k").session.exists()  # the turn left nothing behind


async def test_closed_port_is_named_as_unreachable(make_settings, fake_llm):
    """Connection refused: the console names an unreachable URL, the address and `tusk doctor`."""
    base = f"http://127.0.0.1:{closed_port()}/v1"
    async with running(make_settings(TUSK_API_BASE=base)) as tusk:
        (reply,) = await tusk.say("down", "hello")
    assert "unreachable URL" in reply and "connection refused" in reply and base in reply
    assert "tusk doctor" in reply and "TUSK_API_BASE" in reply


async def test_credentials_in_the_url_are_not_shown(make_settings, fake_llm):
    """A base URL with a user and password in it is shown without them."""
    port = closed_port()
    base = f"http://admin:hunter2secret@127.0.0.1:{port}/v1?key=qsecret"
    async with running(make_settings(TUSK_API_BASE=base)) as tusk:
        (reply,) = await tusk.say("down", "hello")
    assert f"http://127.0.0.1:{port}/v1" in reply
    assert "hunter2secret" not in reply and "qsecret" not in reply and "admin" not in reply


async def test_unknown_model_is_named(make_settings, fake_llm):
    """OpenAI's 404 model_not_found: the console names an unknown model, what the server serves, `tusk doctor`."""
    fake_llm.models = [{"id": "gpt-4o-mini", "object": "model"}]
    fake_llm.script(Reply(status=404, raw_body=json.dumps({"error": {
        "message": "The model `fake-model` does not exist or you do not have access to it.",
        "type": "invalid_request_error", "param": None, "code": "model_not_found"}})))
    async with running(make_settings()) as tusk:
        (reply,) = await tusk.say("nm", "hello")
    assert "unknown model" in reply and "'fake-model'" in reply and "gpt-4o-mini" in reply
    assert "tusk doctor" in reply and "TUSK_MODEL" in reply


async def test_terminal_chat_names_a_wrong_key(fake_llm, tmp_path):
    """`tusk chat` answers a refused key with its cause and the doctor, and keeps chatting."""
    fake_llm.api_keys = {"sk-the-right-one"}
    code, out, err = await run_tusk("chat", env=env_for(fake_llm, tmp_path, TUSK_API_KEY="sk-wrong-but-long"),
                                    stdin=b"hello\n")
    assert code == 0, err
    assert "wrong key" in out and "tusk doctor" in out
    assert "sk-wrong-but-long" not in out + err and "long" not in out


def test_platforms_keep_the_short_wording():
    """The sentence for platform chats names no variable or address; the owner's adds the cause and the fix."""
    for error in (LLMAuthFailed("401", status=401), LLMUnreachable("refused", reason="connection refused"),
                  ModelNotFound("404")):
        assert "TUSK_" not in error.user_message and "http" not in error.user_message
        assert "LLM failure (" in error.owner_message and "tusk doctor" in error.owner_message
    assert "tusk doctor" in LLMError("503").owner_message


def test_unreachable_reason_reads_the_chain():
    """A DNS failure or a refused connection under library wrappers is found; an HTTP error is not one."""
    def wrapped(inner: OSError) -> Exception:  # as litellm hands it over: its error, from httpx's, from the socket's
        middle = httpx.ConnectError("All connection attempts failed")
        middle.__cause__ = inner
        outer = RuntimeError("litellm.InternalServerError: Connection error.")
        outer.__cause__ = middle
        return outer

    assert unreachable_reason(wrapped(socket.gaierror(-2, "Name or service not known"))) == "host not found"
    assert unreachable_reason(wrapped(ConnectionRefusedError(111, "Connection refused"))) == "connection refused"
    assert unreachable_reason(RuntimeError("500 Internal Server Error")) is None


def test_public_url_drops_credentials():
    """User, password, query and fragment leave the address; host, port and path stay."""
    assert public_url("https://u:p@[::1]:8080/v1?api_key=x#f") == "https://[::1]:8080/v1"
    assert public_url("http://localhost:11434") == "http://localhost:11434"
