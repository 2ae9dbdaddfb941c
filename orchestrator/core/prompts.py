"""Rendering of the jinja2 templates in prompts/ (system prompts and the notes the engine inserts).

StrictUndefined makes a missing variable an error at render time instead of a silent blank.
"""
from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

from orchestrator.core.resources import data_dir

if TYPE_CHECKING:
    import jinja2


@cache
def _env() -> jinja2.Environment:
    import jinja2  # with the first prompt rendered, not with every import

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(data_dir("prompts"))),
        undefined=jinja2.StrictUndefined, autoescape=False,
        auto_reload=False,  # packaged templates do not change under a running process: no stat per render
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False,
    )
    env.filters["sentence"] = sentence
    return env


def sentence(text: object) -> str:
    """Text that ends as a sentence does: its own closing mark kept, else a period (never two)."""
    body = str(text).strip()
    return body if not body or body[-1] in ".!?…:;)\"'`" else body + "."


def render(template: str, **values: object) -> str:
    return _template(template).render(**values).strip()


@cache
def _template(name: str) -> jinja2.Template:
    template = _env().get_template(name)
    # Its globals as a plain dict, not jinja's ChainMap over the environment's: every render copies them, and a
    # ChainMap's copy was most of a small render (bench/README.md has the figures). Nothing adds globals later.
    template.globals = dict(template.globals)
    return template
