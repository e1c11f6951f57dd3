"""The bundled templates' stored Jinja output (codegen/template_code.json): current, and used
only for the template text and the environment settings it was made from."""

from __future__ import annotations

import hashlib

import jinja2
import pytest

from codegen import template_code, template_docs
from codegen.render import _MemoryBytecodeCache
from codegen.templates import bundled_templates

SOURCE = "made from {{ 1 + 1 }}\n"


def test_the_stored_code_is_current_and_covers_every_bundled_template() -> None:
    assert template_code.refresh(template_docs._env(), check=True) == 0, "run `python -m codegen.template_docs`"
    assert sorted(template_code._stored()["templates"]) == bundled_templates()


def env_with(source: str) -> jinja2.Environment:
    loader = jinja2.DictLoader({"x.jinja": source})
    return jinja2.Environment(loader=loader, bytecode_cache=_MemoryBytecodeCache(), keep_trailing_newline=True)


@pytest.mark.parametrize(
    ("changed", "expected"),
    [
        (None, "stored 4\n"),
        ("text", "made from 2\nedited\n"),
        ("settings", "made from 2\n"),
        ("jinja", "made from 2\n"),
    ],
)
def test_a_stored_entry_is_used_only_for_what_it_was_made_from(
    changed: str | None, expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = env_with(SOURCE)
    # The stored code is another text's, so that the output shows which one ran.
    entry = {"sha1": hashlib.sha1(SOURCE.encode()).hexdigest(), "python": env.compile("stored {{ 2 + 2 }}\n", raw=True)}
    stored = {"settings": template_code.settings(env), "templates": {"x.jinja": entry}}
    monkeypatch.setattr(template_code, "_stored", lambda: stored)
    if changed == "text":
        env = env_with(SOURCE + "edited\n")
    elif changed == "settings":
        env = env_with(SOURCE)
        env.trim_blocks = True
    elif changed == "jinja":
        monkeypatch.setattr(jinja2, "__version__", "0.0")
    assert env.get_template("x.jinja").render() == expected
