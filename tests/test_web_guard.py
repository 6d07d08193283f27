"""The network guard: what the web tools refuse before connecting, and what the owner may allow."""

import ipaddress
import logging
import socket

import pytest

from bot.errors import WebRefused
from bot.tools.web.guard import Guard, PinnedResolver, Target, parse_allow, why_inside
from tests.fakes.fake_web import FakeWeb

INSIDE = ["http://127.0.0.1/", "http://[::1]/", "http://10.1.2.3/", "http://172.16.0.1/", "http://172.31.255.1/",
          "http://192.168.1.1/", "http://169.254.169.254/latest/meta-data/", "http://[fe80::1]/",
          "http://[::ffff:127.0.0.1]/", "http://[::ffff:169.254.169.254]/", "http://0.0.0.0/", "http://224.0.0.1/",
          "http://100.64.0.1/", "http://240.0.0.1/", "http://2130706433/", "http://0177.0.0.1/", "http://0x7f.1/",
          "http://017700000001/", "http://[64:ff9b::7f00:1]/", "http://[2002:a00:1::]/", "http://[fc00::1]/",
          "http://127.1/", "http://localhost/"]


@pytest.mark.parametrize("url", INSIDE)
async def test_inside_addresses_are_refused(url):
    """Loopback, private, link-local, multicast, reserved, shared, and every spelling or IPv6 form of them."""
    with pytest.raises(WebRefused, match="resolves to .*TUSK_WEB_ALLOW_HOSTS"):
        await Guard().check(url)


@pytest.mark.parametrize(("url", "why"), [
    ("ftp://example.org/x", "only http and https"), ("file:///etc/passwd", "only http and https"),
    ("gopher://example.org/", "only http and https"), ("/relative", "only http and https"),
    ("http://user:pw@example.org/", "user name or password"), ("http://user@example.org/", "user name"),
    ("http://example.org:8080/", "port 8080"), ("https://example.org:22/", "port 22")])
async def test_schemes_credentials_and_ports_are_refused_without_a_lookup(url, why, monkeypatch):
    """Non-http(s) schemes, credentials in the URL and ports other than 80/443 are refused before DNS."""
    monkeypatch.setattr(socket, "getaddrinfo", lambda *a, **k: pytest.fail("looked up"))
    with pytest.raises(WebRefused, match=why):
        await Guard().check(url)


async def test_a_name_whose_dns_answer_points_inside_is_refused(monkeypatch):
    """A public-looking host resolving (also) to a private address is refused: every answer is checked."""
    def fake_dns(host, port, *a, **k):  # DNS cannot be reached from the tests: this one lookup is mocked
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.215.14", port)),
                (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.0.0.5", port))]
    monkeypatch.setattr(socket, "getaddrinfo", fake_dns)
    with pytest.raises(WebRefused, match=r"news\.example resolves to 10\.0\.0\.5, a private address"):
        await Guard().check("https://news.example/a")


async def test_a_public_answer_is_pinned_for_the_connection(monkeypatch):
    """A host resolving outside passes, and the connector is given exactly the checked addresses."""
    monkeypatch.setattr(socket, "getaddrinfo", lambda host, port, *a, **k: [
        (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.215.14", port))])
    target = await Guard().check("https://News.Example./a")
    assert target == Target(target.url, "news.example", 443, ("93.184.215.14",))
    resolver = PinnedResolver()
    resolver.pin(target)
    [pinned] = await resolver.resolve("news.example", 443)
    assert pinned["host"] == "93.184.215.14" and pinned["hostname"] == "news.example"
    with pytest.raises(OSError, match="not checked"):
        await resolver.resolve("other.example", 443)


def test_public_addresses_pass_and_embedded_forms_are_named():
    """Global addresses are not refused; an IPv4-mapped loopback says which form it is."""
    assert why_inside(ipaddress.ip_address("93.184.215.14")) is None
    assert why_inside(ipaddress.ip_address("2606:4700::1111")) is None
    assert why_inside(ipaddress.ip_address("::ffff:127.0.0.1")) == "the IPv4-mapped form of a loopback address"


async def test_the_owner_allows_named_hosts_and_ports():
    """`host:port` opens that port even inside; `host` alone opens 80/443 only; other hosts stay closed."""
    guard = Guard(parse_allow("localhost:8888, 127.0.0.1"))
    assert (await guard.check("http://localhost:8888/search")).port == 8888
    assert (await guard.check("http://127.0.0.1/")).addresses == ("127.0.0.1",)
    with pytest.raises(WebRefused, match="port 8080"):
        await guard.check("http://127.0.0.1:8080/")
    with pytest.raises(WebRefused, match="loopback"):
        await guard.check("http://localhost/")
    with pytest.raises(ValueError, match="not a host"):
        parse_allow("http://x/path")


async def test_a_refusal_is_logged_with_its_reason(caplog):
    """The owner sees each refusal and why in the log."""
    with caplog.at_level(logging.INFO, logger="bot.tools.web.guard"):
        with pytest.raises(WebRefused):
            await Guard().check("http://169.254.169.254/latest/meta-data/")
    assert "web request refused: 169.254.169.254 resolves to 169.254.169.254, a link-local" in caplog.text


async def test_redirects_into_the_network_are_refused():
    """A page on an allowed host redirecting to loopback or metadata is refused at the redirect."""
    from bot.tools.web.guard import GuardedClient
    async with FakeWeb() as site:
        async with GuardedClient(Guard(parse_allow(site.allow)), "Tusk/test", 5) as client:
            for path, where in (("/to-loopback", "127.0.0.1"), ("/to-metadata", "169.254.169.254")):
                with pytest.raises(WebRefused, match=f"{where} resolves to {where}"):
                    await client.request("GET", site.base + path, max_bytes=10_000)
    assert [p for _, p, _ in site.requests] == ["/to-loopback", "/to-metadata"]
