"""Naming rules for Python identifiers derived from protocol names (decided once, used by the IR)."""

from __future__ import annotations

import keyword
import re

_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z0-9])|[A-Z]?[a-z0-9]+|[A-Z]+")

# Names the generated modules define themselves; a protocol name equal to one gets a suffix.
RESERVED_TYPE_NAMES = frozenset(
    {"Any", "Final", "Literal", "Unset", "UNSET", "DecodeError", "DecodeContext", "Warning", "JsonObject"}
)


def serde_alias(name: str) -> str:
    """The name types.py imports serde's `name` under: a leading underscore and a lowercase or
    all-caps serde name, which no protocol-derived name takes (types are Pascal-cased, constants
    and attributes never start with `_`, and the generated private names are `_K_<Type>`,
    `_d_<Type>`, `_<Type>_TAGS`, `_<Type>_VALUES`: none of them a serde name with `_` before it)."""
    return "_" + name


def words(text: str) -> list[str]:
    return _WORD.findall(text.replace("$", " "))


def pascal(text: str) -> str:
    """`agent_message_chunk` / `Parse error` / `resource-link` -> `AgentMessageChunk`."""
    return "".join(w[:1].upper() + w[1:] for w in words(text))


def snake(text: str) -> str:
    """`toolCallId` -> `tool_call_id`; a keyword gets a trailing underscore."""
    name = "_".join(w.lower() for w in words(text)) or "field"
    if name[0].isdigit():
        name = f"f_{name}"
    return name + "_" if keyword.iskeyword(name) or keyword.issoftkeyword(name) else name


def upper_snake(text: str) -> str:
    name = "_".join(w.upper() for w in words(text)) or "VALUE"
    return f"V_{name}" if name[0].isdigit() else name


def handler_name(method: str) -> str:
    """`session/set_mode` -> `session_set_mode`, `$/cancel_request` -> `cancel_request`."""
    return snake(method.replace("/", "_"))


def is_identifier(name: str) -> bool:
    return name.isidentifier() and not keyword.iskeyword(name)


def free_name(name: str, taken: set[str] | frozenset[str], clash: str) -> str:
    """`name`, or `clash` when a generated field name takes it.

    `clash` must be a spelling `snake` never produces (a leading underscore, or a trailing
    one on a non-keyword), so it cannot clash in turn.
    """
    return clash if name in taken else name
