"""`tusk doctor`: is this installation able to run? Each check gives a verdict and the fix.

    config  settings file  unknown variables (bot/ops/doctor_env.py)  data dir  HTTP access  HTTP port
    tokenizer  the model (bot/ops/probe.py)  each platform token  each MCP server  backup
    schedules (bot/schedules/health.py: failed runs)  the web tools  the skills (bot/skills/doctor.py)
    speech (bot/speech/doctor.py: a phrase spoken)  allow-lists

Each check is a `Check` (bot/ops/check.py), the unit `tusk init` shows too.

`report` prints them with every secret masked, exactly as the log does (bot/logs.py); the
HTTP access check applies the very rule `tusk run` enforces (channels/http/ `bind_problem`).

Platform tokens are checked with one plain HTTPS call each (Telegram `getMe`, Slack
`auth.test`, Discord `users/@me`), so the doctor needs none of the platform libraries.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import shutil
import tempfile
from collections.abc import Awaitable, Callable, Mapping

import aiohttp

from bot import logs
from bot.config import Settings
from bot.errors import ConfigError
from bot.ops import access, doctor_env
from bot.ops.check import Check
from bot.places import SettingsFile, settings_file
from memory.paths import private_dir

DISCORD_API = "https://discord.com"
LOW_SPACE = 1 << 30  # warn below 1 GiB free
NO_SPACE = 100 << 20  # fail below 100 MiB
TIMEOUT = aiohttp.ClientTimeout(total=20)


def _data_dir(settings: Settings) -> Check:
    home = settings.home.resolve()
    if (not_yet := doctor_env.data_dir_to_be(home)) is not None:  # a check creates nothing
        return not_yet
    try:
        private_dir(home, follow=True)
        with tempfile.NamedTemporaryFile(dir=home, prefix=".doctor-"):
            pass
    except OSError as exc:
        return Check("data dir", "fail", f"{home} is not writable: {exc.strerror}",
                     "create it and give the user running Tusk write access, or set TUSK_HOME")
    if home.stat().st_mode & 0o077:
        return Check("data dir", "warn", f"{home} can be read by other accounts on this machine "
                     f"(mode {home.stat().st_mode & 0o777:o})", f"chmod 700 {home}")
    free = shutil.disk_usage(home).free
    verdict = "fail" if free < NO_SPACE else "warn" if free < LOW_SPACE else "ok"
    return Check("data dir", verdict, f"{home} is writable, {free / 2**30:.1f} GiB free",
                 "" if verdict == "ok" else "free some disk space: sessions are append-only and grow")


def _http_access(settings: Settings) -> Check:
    from channels.http import bind_problem

    try:
        token = access.http_access(settings, create=False).token
    except ConfigError as exc:
        return Check("HTTP access", "fail", str(exc), "delete the file; Tusk makes a new token at start")
    if token is None and access.configured(settings) is None:
        token = "x" * 43  # not made yet: `tusk run` makes a 43-character token at first start
    if problem := bind_problem(settings.http_host, token):
        return Check("HTTP access", "fail", problem, "`tusk run` refuses to start until this is fixed")
    mode = ("without a token (TUSK_HTTP_TOKEN=off)" if token is None else "with the console token"
            if access.configured(settings) is None else "with TUSK_HTTP_TOKEN")
    return Check("HTTP access", "ok", f"API and console on {settings.http_host}:{settings.http_port} {mode}")


def _tokenizer() -> Check:
    from memory import tokens

    try:
        tokens.encoding()
    except tokens.TokenizerUnavailable as exc:
        return Check("tokenizer", "fail", str(exc), "reinstall: pip install --force-reinstall litellm tiktoken")
    return Check("tokenizer", "ok", "cl100k_base loads offline")


async def _get_json(method: str, url: str, headers: dict[str, str] | None = None) -> tuple[int, dict]:
    async with aiohttp.ClientSession(timeout=TIMEOUT) as client:
        async with client.request(method, url, headers=headers) as resp:
            try:
                body = await resp.json(content_type=None)
            except ValueError:
                body = {}
            return resp.status, body if isinstance(body, dict) else {}


async def _telegram(s: Settings) -> Check:
    assert s.telegram_bot_token is not None
    status, body = await _get_json("POST", f"{s.telegram_api_base.rstrip('/')}/bot"
                                           f"{s.telegram_bot_token.get_secret_value()}/getMe")
    if body.get("ok"):
        return Check("Telegram", "ok", f"token accepted: @{body['result'].get('username')}")
    return Check("Telegram", "fail", f"token refused ({status} {body.get('description', '')})".rstrip(),
                 "copy TELEGRAM_BOT_TOKEN again from @BotFather (/mybots -> API Token)")


async def _slack(s: Settings) -> Check:
    assert s.slack_bot_token is not None
    url = s.slack_api_url.rstrip("/") + "/auth.test"
    body, scopes = await _slack_auth(url, s.slack_bot_token.get_secret_value())
    if not body.get("ok"):
        return Check("Slack", "fail", f"SLACK_BOT_TOKEN refused ({body.get('error', 'no answer')})",
                     "copy the Bot User OAuth Token (xoxb-...) from your app's OAuth & Permissions page")
    if not (s.slack_app_token or s.slack_signing_secret):
        return Check("Slack", "fail", "neither SLACK_APP_TOKEN nor SLACK_SIGNING_SECRET is set",
                     "set SLACK_APP_TOKEN (xapp-..., Socket Mode) or SLACK_SIGNING_SECRET (HTTP events)")
    accepted = f"token accepted: {body.get('user', '?')} in {body.get('team', '?')}"
    if scopes is not None and "files:read" not in scopes.split(","):  # Slack lists the token's scopes in a header
        return Check("Slack", "warn", f"{accepted}, but without the files:read scope: files people share "
                     "(voice clips, photos, documents) cannot be read",
                     "add files:read under OAuth & Permissions -> Bot Token Scopes, then reinstall the app")
    return Check("Slack", "ok", accepted)


async def _slack_auth(url: str, token: str) -> tuple[dict, str | None]:
    """auth.test's answer, and the token's scopes from its `x-oauth-scopes` header (None if absent)."""
    async with aiohttp.ClientSession(timeout=TIMEOUT) as client:
        async with client.post(url, headers={"Authorization": f"Bearer {token}"}) as resp:
            try:
                body = await resp.json(content_type=None)
            except ValueError:
                body = {}
            return body if isinstance(body, dict) else {}, resp.headers.get("x-oauth-scopes")


async def _discord(s: Settings) -> Check:
    assert s.discord_bot_token is not None
    from channels.discord_bot import api_root  # the token is set, so the discord extra is installed

    url = api_root(s.discord_api_base or DISCORD_API) + "/users/@me"
    status, body = await _get_json("GET", url, {"Authorization": f"Bot {s.discord_bot_token.get_secret_value()}"})
    if not (status == 200 and body.get("id")):
        return Check("Discord", "fail", f"token refused ({status})",
                     "reset and copy the token on your application's Bot page in the Discord Developer Portal")
    return await _discord_intent(s, f"token accepted: {body.get('username')}")


async def _discord_intent(s: Settings, accepted: str) -> Check:
    """The application's flags: is the Message Content intent on? (channels/discord_bot/refusals.py)"""
    assert s.discord_bot_token is not None
    from channels.discord_bot import api_root
    from channels.discord_bot.refusals import PORTAL, content_intent_enabled

    url = api_root(s.discord_api_base or DISCORD_API) + "/applications/@me"
    status, app = await _get_json("GET", url, {"Authorization": f"Bot {s.discord_bot_token.get_secret_value()}"})
    if status == 200 and not content_intent_enabled(int(app.get("flags") or 0)):
        return Check("Discord", "warn", f"{accepted}, but the Message Content intent is off: only DMs and "
                     "messages that mention the bot can be read", f"switch on {PORTAL}")
    return Check("Discord", "ok", accepted)


async def _platform(name: str, probe: Callable[[], Awaitable[Check]]) -> Check:
    try:
        return await probe()
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        return Check(name, "fail", f"cannot reach the API: {exc or type(exc).__name__}",
                     "check the network (and the API base setting, if you changed it)")


async def run_checks(settings: Settings, env_file: SettingsFile | None = None,
                     environ: Mapping[str, str] | None = None, model: bool = True) -> list[Check]:
    """Every check, in order; a check that cannot run (no model set) fails with its fix. With `env_file`
    (the settings file load_settings looked for) and `environ`, also which file was read and unknown names.
    `model=False` (`tusk doctor --no-model`) sends the provider nothing and says the model was not checked."""
    checks = [Check("config", "ok", "settings are valid")]
    if env_file is not None:
        checks += [doctor_env.settings_file(env_file), *doctor_env.unknown_variables(environ or {}, env_file.path)]
    checks += [_data_dir(settings), _http_access(settings), await doctor_env.http_port(settings), _tokenizer()]
    try:
        if not model:
            model_name = settings.llm_settings().model
            checks.append(Check("LLM", "skip", f"{model_name} not checked (--no-model): no request sent"))
        else:
            from bot.ops.probe import probe  # imports litellm: only when the model is checked

            checks += await probe(settings)
    except ConfigError as exc:
        checks.append(Check("LLM", "fail", str(exc), "run `tusk init`, or set TUSK_MODEL in the environment or "
                            "the settings file"))
    platforms = [("Telegram", settings.telegram_bot_token, _telegram), ("Slack", settings.slack_bot_token, _slack),
                 ("Discord", settings.discord_bot_token, _discord)]
    for name, token, check in platforms:
        if token is not None:
            checks.append(await _platform(name, functools.partial(check, settings)))
    if not any(token for _, token, _ in platforms):
        checks.append(Check("platforms", "warn", "no platform token is set: only the local HTTP API and "
                            "`tusk chat` will run", "set TELEGRAM_BOT_TOKEN, DISCORD_BOT_TOKEN or SLACK_BOT_TOKEN"))
    checks += _spend_limits(settings, exact=model and bool(settings.model))
    checks += await _mcp(settings)
    from bot.ops.backup import doctor_check

    if (backup := doctor_check(settings.home, settings.backup_dir)) is not None:
        checks.append(Check("backup", *backup))
    from bot.schedules.health import check as schedules_check

    if (schedules := schedules_check(settings)) is not None:
        checks.append(Check("schedules", *schedules))
    from bot.tools.web.doctor import web_checks

    checks += await web_checks(settings)
    from bot.skills.doctor import skill_checks
    from bot.speech.doctor import speech_checks

    checks += skill_checks(settings)
    checks += await speech_checks(settings, model)  # a short phrase spoken, where speech is set up
    for variable in settings.open_allow_lists():
        checks.append(Check("allow-list", "warn", f"{variable} is empty: anyone may talk to the bot",
                            f"set {variable} to the user ids allowed to use Tusk"))
    return checks


def _spend_limits(settings: Settings, exact: bool) -> list[Check]:
    """A USD limit (in the environment or a chat's own in budgets.json) that cannot count a model Tusk calls:
    its price is unknown (bot/usage/unpriced.py). `exact`: litellm's price table may be read (the model
    check imported litellm already); else what TUSK_MODELS and the ledger say."""
    from bot.ops.usage import book
    from bot.usage.unpriced import Unpriced
    from store.errors import StoreError

    try:
        # usage.sqlite read only if it is there (the doctor creates nothing), or the database's
        with book(settings) as kept:
            found = Unpriced.of(settings, kept.ledger, kept.limits(settings.limit_settings()), table=exact,
                                prefs=kept.prefs).overall()
    except ValueError as exc:  # a damaged budgets.json
        return [Check("spend limits", "fail", str(exc), "fix budgets.json or remove it (`tusk budget` writes it)")]
    except StoreError as exc:  # the database: its own check says more
        return [Check("spend limits", "fail", str(exc), "see the database's check above")]
    return [Check("spend limits", "ok", u["note"]) if u["token_limit"] else
            Check("spend limits", "warn", u["problem"], u["fix"]) for u in found]


async def _mcp(settings: Settings) -> list[Check]:
    """One check per MCP server in mcp.json: started alone, its tools listed (none if there is no mcp.json)."""
    try:
        servers = settings.mcp_servers()
    except ConfigError as exc:
        return [Check("MCP", "fail", str(exc), "fix mcp.json (or TUSK_MCP_CONFIG)")]
    if not servers:
        return []
    from bot.tools.mcp.doctor import probe

    results = await asyncio.gather(*(probe(server, settings.mcp_settings()) for server in servers))
    return [Check(f"MCP {server.name}", *result) for server, result in zip(servers, results)]


def exit_code(checks: list[Check]) -> int:
    return 1 if any(c.verdict == "fail" for c in checks) else 0


def command(args: argparse.Namespace, settings: Settings) -> int:
    """`tusk doctor [--no-model]` (called by bot/ops/cli.py)."""
    return report(settings, model=not args.no_model)


def report(settings: Settings, source: SettingsFile | None = None, model: bool = True) -> int:
    """`tusk doctor` (and the end of `tusk init`): every check printed, its secrets masked, then the verdict;
    the exit code. `source` is the settings file to report on (default: the one Tusk reads)."""
    checks = asyncio.run(run_checks(settings, source or settings_file(), os.environ, model=model))
    secrets = settings.secrets() + access.log_secrets(settings)
    for check in checks:
        print(logs.mask(check.line(), secrets))  # exactly as the log masks them
    code = exit_code(checks)
    print("All is well." if code == 0 else "Something is broken: see FAIL above.")
    return code
