"""Model outputs and prompts as sanitised Markdown: markdown-it-py with raw HTML off, then nh3.

Raw HTML in an answer is shown as text, never rendered; nh3 (ammonia) then keeps only an allow-list of tags
and attributes and only http(s)/mailto links (no style attributes: the CSP forbids inline styles), so even
a renderer bug cannot smuggle in a script.
"""

from __future__ import annotations

from functools import lru_cache

import nh3
from markdown_it import MarkdownIt

__all__ = ["render_markdown"]

_md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable(
    ["table", "strikethrough"]
)

ALLOWED_TAGS = {
    "p", "br", "hr", "strong", "em", "del", "s", "code", "pre", "blockquote", "ul", "ol", "li",
    "h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td", "a", "span",
}  # fmt: skip
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title"},
    "code": {"class"},
    "ol": {"start"},
}


@lru_cache(maxsize=4096)
def render_markdown(text: str) -> str:
    """Markdown -> safe HTML (cached: the same answers are shown over and over)."""
    html = _md.render(text)
    return nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes={"http", "https", "mailto"},
        link_rel="nofollow noopener noreferrer",
    )
