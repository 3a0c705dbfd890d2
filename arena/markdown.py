"""Model outputs and prompts as sanitised Markdown: markdown-it-py with raw HTML off, then nh3.

Raw HTML in an answer is shown as text, never rendered; nh3 (ammonia) then keeps only an allow-list of tags
and attributes and only http(s)/mailto links (no style attributes: the CSP forbids inline styles), so even
a renderer bug cannot smuggle in a script.

Headings inside a prompt or an answer sit below the page's own: the page has its h1 and labels each
answer with an h2, so a Markdown ``# Title`` becomes an h3 and deeper levels follow, down to h6.
"""

from __future__ import annotations

from functools import lru_cache

import nh3
from markdown_it import MarkdownIt
from markdown_it.rules_core import StateCore

__all__ = ["HEADING_OFFSET", "render_markdown"]

HEADING_OFFSET = 2
"""How many levels a Markdown heading is demoted: ``#`` (h1) is shown as h3, the page keeps h1 and h2."""
_DEEPEST_HEADING = 6


def _demote_headings(state: StateCore) -> None:
    for token in state.tokens:
        if token.type in ("heading_open", "heading_close"):
            level = min(int(token.tag[1:]) + HEADING_OFFSET, _DEEPEST_HEADING)
            token.tag = f"h{level}"


_md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable(
    ["table", "strikethrough"]
)
_md.core.ruler.push("demote_headings", _demote_headings)

ALLOWED_TAGS = {
    "p", "br", "hr", "strong", "em", "del", "s", "code", "pre", "blockquote", "ul", "ol", "li",
    "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td", "a", "span",
}  # fmt: skip
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title"},
    "code": {"class"},
    "ol": {"start"},
}


@lru_cache(maxsize=4096)
def render_markdown(text: str) -> str:
    """Markdown -> safe HTML with headings demoted by ``HEADING_OFFSET`` (cached: answers repeat)."""
    html = _md.render(text)
    return nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes={"http", "https", "mailto"},
        link_rel="nofollow noopener noreferrer",
    )
