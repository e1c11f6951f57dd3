"""Stage 2b (methods) — the evidence that says what each meta.json method is.

ACP releases have described a method's types in several ways, and not every release uses all
of them:

- the `x-method`/`x-side` extensions on the params and response types;
- the `*Request` / `*Response` / `*Notification` naming of those types;
- the message unions (`AgentRequest`, `ClientResponse`, ...: a `$defs` entry named with one
  of those suffixes and no `x-method`), whose variants are `$ref`s or inline titled schemas
  (`{"title": "AuthenticateResponse", "type": "null"}`), sometimes nested in a JSON-RPC
  envelope's `params`/`result`.

`gather` reads all of it into `Evidence`; build.py decides from it. A method is a request or
a notification only when the evidence says so; when it says both, or nothing, the caller stops.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from .load import LoadedSchema
from .naming import pascal, words
from .shapes import alternatives, ptr_escape, unwrap_ref

Kind = Literal["Request", "Response", "Notification"]
SUFFIXES: tuple[Kind, ...] = ("Request", "Response", "Notification")


@dataclass(frozen=True)
class Leaf:
    """One variant of a message union: a `$defs` name, or an inline schema with a title."""

    name: str  # the $defs name, or the inline variant's title
    kind: Kind  # what the union it sits in carries
    pointer: str  # where the variant is written
    inline: dict[str, Any] | None = None  # the schema of an inline variant


@dataclass
class Evidence:
    """What the schema says about its message types, indexed for `build._methods`."""

    x_method: dict[str, str] = field(default_factory=dict)  # $defs name -> x-method
    x_side: dict[str, str] = field(default_factory=dict)  # $defs name -> x-side
    unions: dict[str, str] = field(default_factory=dict)  # message union name -> pointer
    leaves: dict[str, Leaf] = field(default_factory=dict)  # variant name -> where it first sits
    kinds: dict[str, set[Kind]] = field(default_factory=dict)  # variant name -> kinds of its unions

    def by_method(self, wire: str) -> list[str]:
        return [name for name, method in self.x_method.items() if method == wire]

    def in_union(self, name: str) -> Kind | None:
        """The kind of the message unions holding `name`; None if none, or unions of both kinds."""
        kinds = self.kinds.get(name, set())
        return next(iter(kinds)) if len(kinds) == 1 else None


def suffix_of(name: str) -> Kind | None:
    return next((s for s in SUFFIXES if name.endswith(s) and name != s), None)


def stem(name: str) -> str:
    """`AuthenticateRequest` -> `Authenticate`: what a request and its response share."""
    kind = suffix_of(name)
    return name[: -len(kind)] if kind else name


def gather(schema: LoadedSchema) -> Evidence:
    ev = Evidence()
    for name, node in schema.defs.items():
        if isinstance(node.get("x-method"), str):
            ev.x_method[name] = node["x-method"]
        if isinstance(node.get("x-side"), str):
            ev.x_side[name] = node["x-side"]
    for name, node in schema.defs.items():
        kind = suffix_of(name)
        if kind is None or name in ev.x_method:
            continue
        pointer = f"/$defs/{ptr_escape(name)}"
        found: list[Leaf] = []
        _walk(node, pointer, kind, found, root=True)
        if found:
            ev.unions[name] = pointer
            for leaf in found:
                ev.leaves.setdefault(leaf.name, leaf)
                ev.kinds.setdefault(leaf.name, set()).add(leaf.kind)
    return ev


def _walk(node: Any, pointer: str, kind: Kind, out: list[Leaf], root: bool = False) -> None:
    """The variants of a message union, through nested unions and JSON-RPC envelopes."""
    if not isinstance(node, dict):
        return
    alts = alternatives(node)
    if alts is not None:
        for i, alt in enumerate(alts[1]):
            _walk(alt, f"{pointer}/{alts[0]}/{i}", kind, out)
        return
    props = node.get("properties")
    if isinstance(props, dict) and ("method" in props or "id" in props) and ("params" in props or "result" in props):
        # A JSON-RPC envelope: its params (or result) are the union's payload.
        for key in ("params", "result"):
            if key in props:
                _walk(props[key], f"{pointer}/properties/{key}", kind, out)
        return
    if root:
        return
    ref = unwrap_ref(node, allow_props=True)
    if ref is not None:
        out.append(Leaf(ref, kind, pointer))
    elif isinstance(node.get("title"), str) and node["title"]:
        out.append(Leaf(node["title"], kind, pointer, node))


def by_naming(wire: str, names: list[str]) -> list[str]:
    """Without x-method: the `*Request`/`*Response`/`*Notification` names made of the method's words.

    A candidate's words must all come from the method name; the one holding the method's last
    word (its action: `session/cancel` -> CancelNotification) wins, then the larger overlap.
    A tie is left unmapped (the caller reports it) rather than guessed.
    """
    want_words = [_word(w) for w in words(pascal(wire.replace("/", "_")))]
    want = set(want_words)
    best: dict[str, list[tuple[tuple[bool, int], str]]] = {}
    for name in names:
        suffix = suffix_of(name)
        if suffix is None:
            continue
        have = {_word(w) for w in words(name[: -len(suffix)])}
        if not have or not have <= want:
            continue
        kind = "Response" if suffix == "Response" else "params"
        best.setdefault(kind, []).append(((want_words[-1] in have, len(have)), name))
    found: list[str] = []
    for ranked in best.values():
        ranked.sort(reverse=True)
        if len(ranked) == 1 or ranked[0][0] != ranked[1][0]:
            found.append(ranked[0][1])
    return found


def _word(word: str) -> str:
    """`Sessions` -> `session`: method names say `session/list`, types `ListSessionsRequest`."""
    word = word.lower()
    return word[:-1] if word.endswith("s") and len(word) > 3 else word
