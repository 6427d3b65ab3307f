"""Claude Code's WebFetch(domain:...) rules match the URL's host, never the rest of the URL."""

from __future__ import annotations

import pytest

from subagents.authority.rules import parse_rule


@pytest.mark.parametrize(("rule", "url", "expected"), [
    ("WebFetch(domain:example.com)", "https://example.com/x", True),
    ("WebFetch(domain:example.com)", "https://EXAMPLE.com./x", True),
    ("WebFetch(domain:example.com)", "https://evil.com/?example.com", False),
    ("WebFetch(domain:example.com)", "https://example.com.evil.com/", False),
    ("WebFetch(domain:example.com)", "https://docs.example.com/", False),
    ("web_fetch(domain:*.example.com)", "https://docs.example.com/", True),
    ("web_fetch(domain:*.example.com)", "https://notexample.com/", False),
    ("web_fetch(domain:example.com)", "not a url", False),
    ("web_fetch(domain:example.com)", "http://[::1/", False),
])
def test_domain_rules(rule: str, url: str, expected: bool) -> None:
    r = parse_rule(rule)
    assert r.tool == "web_fetch"
    assert r.matches("web_fetch", {"url": url}, allow=True) is expected
