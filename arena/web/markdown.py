"""Model outputs and prompts as sanitised Markdown: markdown-it-py with raw HTML off, then nh3.

Raw HTML in an answer is shown as text, never rendered; nh3 (ammonia) then keeps only an allow-list of tags
and attributes and only http(s)/mailto links (no style attributes: the CSP forbids inline styles), so even
a renderer bug cannot smuggle in a script.

Math (``$...$``, ``$$...$$``, ``\\(...\\)``, ``\\[...\\]``) is parsed before Markdown can eat its backslashes
and rendered on the server to MathML (latex2mathml), which browsers draw natively: no script, CSP unchanged.
A formula latex2mathml cannot read is shown as its source in a code span. Fenced code is highlighted on the
server by Pygments into ``<span class="...">`` tokens, coloured by ``static/highlight.css``; the sanitiser
lets through the MathML elements and those token classes, nothing more.

Headings inside a prompt or an answer sit below the page's own: the page has its h1 and labels each
answer with an h2, so a Markdown ``# Title`` becomes an h3 and deeper levels follow, down to h6.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import nh3
from defusedxml import DefusedXmlException
from defusedxml.ElementTree import ParseError
from defusedxml.ElementTree import fromstring as parse_xml
from latex2mathml.converter import convert as latex_to_mathml
from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.rules_core import StateCore
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict
from mdit_py_plugins.dollarmath import dollarmath_plugin
from mdit_py_plugins.texmath import texmath_plugin
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name
from pygments.token import STANDARD_TYPES
from pygments.util import ClassNotFound

__all__ = ["HEADING_OFFSET", "render_markdown"]

HEADING_OFFSET = 2
"""How many levels a Markdown heading is demoted: ``#`` (h1) is shown as h3, the page keeps h1 and h2."""
_DEEPEST_HEADING = 6


def _demote_headings(state: StateCore) -> None:
    for token in state.tokens:
        if token.type in ("heading_open", "heading_close"):
            level = min(int(token.tag[1:]) + HEADING_OFFSET, _DEEPEST_HEADING)
            token.tag = f"h{level}"


#: The MathML Core elements latex2mathml writes (presentation markup only: no links, no scripts).
MATHML_TAGS = {
    "math", "mrow", "mi", "mn", "mo", "ms", "mtext", "mspace", "mfrac", "msqrt", "mroot", "msub", "msup",
    "msubsup", "munder", "mover", "munderover", "mtable", "mtr", "mtd", "mstyle", "mpadded", "mphantom",
    "menclose", "semantics", "annotation", "merror",
}  # fmt: skip


def _is_mathml(markup: str) -> bool:
    """Well-formed XML made of MathML elements only (latex2mathml copies ``\\text{...}`` through unescaped,
    so a formula can carry markup of its own: such a formula is shown as source instead)."""
    try:
        root = parse_xml(markup)  # defusedxml: no DTDs, entities or external references
    except (ParseError, DefusedXmlException):
        return False
    return all(element.tag.rpartition("}")[2] in MATHML_TAGS for element in root.iter())


def _math(source: str, *, display: bool) -> str:
    """MathML for a TeX formula; its source in a code span when latex2mathml cannot read it."""
    try:
        markup = latex_to_mathml(source.strip(), display="block" if display else "inline")
    except Exception:  # noqa: BLE001 - any parser failure shows the source instead
        markup = ""
    if markup and _is_mathml(markup):
        return markup
    code = f'<code class="math-source">{html.escape(source.strip())}</code>'
    return f"<p>{code}</p>" if display else code


def _render_math_inline(
    _self: RendererHTML, tokens: Sequence[Token], idx: int, _options: OptionsDict, _env: EnvType
) -> str:
    return _math(tokens[idx].content, display=False)


def _render_math_block(
    _self: RendererHTML, tokens: Sequence[Token], idx: int, _options: OptionsDict, _env: EnvType
) -> str:
    return _math(tokens[idx].content, display=True) + "\n"


_FORMATTER = HtmlFormatter(nowrap=True)
#: Pygments' short token classes (``k``, ``s2``, ...): the only classes a code span may carry.
CODE_CLASSES = frozenset(c for c in STANDARD_TYPES.values() if c)


def _highlight(code: str, lang: str, attrs: Any) -> str:  # noqa: ARG001 - markdown-it's signature
    """Highlighted HTML for a fenced block with a known language; empty (markdown-it escapes it) otherwise."""
    if not lang:
        return ""
    try:
        lexer = get_lexer_by_name(lang.split()[0], stripnl=False, ensurenl=False)
    except ClassNotFound:
        return ""
    return str(highlight(code, lexer, _FORMATTER))


_md = (
    MarkdownIt(
        "commonmark",
        {"html": False, "linkify": False, "typographer": False, "highlight": _highlight},
    )
    .enable(["table", "strikethrough"])
    .use(dollarmath_plugin, allow_space=False, allow_digits=False, double_inline=True)
    .use(texmath_plugin, delimiters="brackets")
)
_md.core.ruler.push("demote_headings", _demote_headings)
for _kind in ("math_inline", "math_inline_double"):
    _md.add_render_rule(_kind, _render_math_inline)
for _kind in ("math_block", "math_block_label", "math_block_eqno"):
    _md.add_render_rule(_kind, _render_math_block)

ALLOWED_TAGS = {
    "p", "br", "hr", "strong", "em", "del", "s", "code", "pre", "blockquote", "ul", "ol", "li",
    "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td", "a", "span",
    *MATHML_TAGS,
}  # fmt: skip
_MATH_ATTRIBUTES = {
    "mathvariant", "displaystyle", "scriptlevel", "stretchy", "fence", "separator", "lspace", "rspace",
    "minsize", "maxsize", "movablelimits", "accent", "accentunder",
}  # fmt: skip
ALLOWED_ATTRIBUTES: dict[str, set[str]] = {
    "a": {"href", "title"},
    "code": {"class"},
    "ol": {"start"},
    "math": {"display", "xmlns"},
    "mspace": {"width", "height", "depth"},
    "mpadded": {"width", "height", "depth", "lspace", "voffset"},
    "mfrac": {"linethickness"},
    "mtable": {"columnalign", "rowspacing", "columnspacing"},
    "mtd": {"columnalign", "columnspan", "rowspan"},
    "menclose": {"notation"},
    "annotation": {"encoding"},
    **{tag: set(_MATH_ATTRIBUTES) for tag in ("mo", "mi", "mn", "mstyle", "munder", "mover", "munderover")},
}
ALLOWED_CLASSES = {"span": set(CODE_CLASSES)}


@lru_cache(maxsize=4096)
def render_markdown(text: str) -> str:
    """Markdown -> safe HTML with headings demoted by ``HEADING_OFFSET`` (cached: answers repeat)."""
    return render_markdown_uncached(text)


def render_markdown_uncached(text: str) -> str:
    """:func:`render_markdown` without the cache, for texts shown once (a live answer while it streams)."""
    html = _md.render(text)
    return nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        allowed_classes=ALLOWED_CLASSES,
        url_schemes={"http", "https", "mailto"},
        link_rel="nofollow noopener noreferrer",
    )
