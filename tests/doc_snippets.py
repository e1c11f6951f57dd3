"""Reading the python snippets of the README and docs/ pages, for the tests that run or
type-check them."""

from __future__ import annotations

import re

_PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def python_blocks(text: str) -> list[str]:
    """The ```python blocks of a Markdown text, in order (a fence counts at the start of a line)."""
    return _PYTHON_BLOCK.findall(text)


def as_golden(source: str) -> str:
    """A snippet importing the vendored packages (`myagent.acp`, `myclient.acp`) as the golden
    ones the tests import by name (`agent`, `client`)."""
    return source.replace("myagent.acp", "agent").replace("myclient.acp", "client")
