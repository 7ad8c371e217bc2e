"""Jinja2 rendering of report sections (``templates/report.md.j2``, ``report.html.j2``);
notes, titles and cells are inline Markdown (markdown-it-py on the HTML page).
"""

from __future__ import annotations

import functools
import html
import re
from typing import Any

__all__ = ["environment", "inline_markdown", "md_cell", "render_template"]

#: Files this module reads, relative to its folder (DVC deps, ``scripts/stage_deps.py``).
DATA_DEPS = ("templates",)


@functools.lru_cache(maxsize=1)
def _markdown():
    from markdown_it import MarkdownIt

    md = MarkdownIt("zero").enable(["backticks", "emphasis", "link"])

    def link(self, tokens, idx, options, env):  # link_open and link_close
        j = idx
        while tokens[j].type != "link_open":  # a link_close's href: on its link_open
            j -= 1
        href = str(tokens[j].attrGet("href") or "")
        if href.startswith("#"):
            return self.renderToken(tokens, idx, options, env)
        closing = tokens[idx].type == "link_close"  # the address after the label
        return f' <span class="ref">({html.escape(href)})</span>' if closing else ""

    md.add_render_rule("link_open", link)
    md.add_render_rule("link_close", link)
    return md


def inline_markdown(text: Any) -> str:
    """``text`` as HTML: escaped, with inline Markdown (`code`, **bold**, *em*, links to
    ``#anchors``) rendered by markdown-it-py; any other link becomes ``label (address)``."""
    return _markdown().renderInline(str(text))


def md_cell(v: Any) -> str:
    """One Markdown table cell: a float with 4 significant digits, pipes escaped, one line."""
    return f"{v:.4g}" if isinstance(v, float) else str(v).replace("|", "\\|").replace("\n", " ")


@functools.lru_cache(maxsize=1)
def environment():
    """The report's ``jinja2.Environment`` (templates of this package; HTML autoescaped)."""
    import jinja2
    from markupsafe import Markup

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("contrastlab.reporting", "templates"),
        autoescape=jinja2.select_autoescape(["html.j2"]),
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined)
    env.filters["md"] = lambda t: Markup(inline_markdown(t))
    env.filters["md_row"] = lambda row: "| " + " | ".join(md_cell(v) for v in row) + " |"
    env.filters["md_rule"] = lambda row: "|" + "|".join("---" for _ in row) + "|"
    return env


def render_template(name: str, **context: Any) -> str:
    """Render ``templates/<name>``; Markdown output has runs of blank lines collapsed.

    Raises:
        jinja2.UndefinedError: the template uses a name ``context`` lacks.
    """
    out = environment().get_template(name).render(**context)
    return re.sub(r"\n{3,}", "\n\n", out).strip() + "\n" if name.endswith(".md.j2") else out


