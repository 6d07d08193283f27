"""Headless Chromium for the web console tests: the system browser, driven by Playwright's sync
API in one thread of its own, so the test's event loop keeps serving Tusk meanwhile.

    async def test_x(tusk, browser):
        def scenario(page):            # runs in the browser thread
            page.goto(tusk.url + "/")
            ...
        await browser.run(scenario)    # a fresh browser context per call; page errors fail the test

No browser is ever downloaded: `CHROMIUM` (default /usr/bin/chromium, Debian's package, which
.ci/run installs) is launched with flags that keep it off the network.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import pytest

CHROMIUM = os.environ.get("TUSK_TEST_CHROMIUM", "/usr/bin/chromium")


def playwright_expect() -> Any:
    """Playwright's `expect`, for a browser test module's import: without Playwright or Chromium the
    module is skipped locally, and fails in CI (a missing browser there is a failure, never a silent skip)."""
    try:
        from playwright.sync_api import expect
    except ImportError:
        if os.environ.get("CI"):
            raise
        pytest.skip("pip install -e '.[test]' for the browser tests", allow_module_level=True)
    if not shutil.which(CHROMIUM):
        if os.environ.get("CI"):
            raise RuntimeError(f"{CHROMIUM} is missing: .ci/run installs Debian's chromium package")
        pytest.skip(f"{CHROMIUM} is missing (apt-get install -y chromium)", allow_module_level=True)
    expect.set_options(timeout=10_000)  # as the pages' own default: a loaded 2-core run can take past 5 s
    return expect
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
T = TypeVar("T")


class BrowserThread:
    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="chromium")
        self._pool.submit(self._launch).result()

    def _launch(self) -> None:
        from playwright.sync_api import sync_playwright

        self._playwright = sync_playwright().start()
        self._browser = self._playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)

    def _scenario(self, fn: Callable[..., T], options: dict[str, Any], allowed: tuple[str, ...]) -> T:
        context = self._browser.new_context(**options)
        context.set_default_timeout(10_000)
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(f"uncaught: {exc}"))
        page.on("console", lambda msg: errors.append(f"console: {msg.text}") if msg.type == "error" else None)
        try:
            result = fn(page)
        finally:
            context.close()
        unexpected = [e for e in errors if not any(a in e for a in allowed)]
        assert not unexpected, f"the page logged errors: {unexpected}"
        return result

    async def run(self, fn: Callable[..., T], *, allow_errors: tuple[str, ...] = (), **options: Any) -> T:
        """Run `fn(page)` in a fresh context (options as for `browser.new_context`) in the browser thread;
        console errors containing one of `allow_errors` (e.g. an expected 401) do not fail the test."""
        return await asyncio.get_running_loop().run_in_executor(self._pool, self._scenario, fn, options, allow_errors)

    def close(self) -> None:
        def stop() -> None:
            self._browser.close()
            self._playwright.stop()

        self._pool.submit(stop).result()
        self._pool.shutdown()
