"""Arbitrary JSON values for hypothesis, drawn with far fewer nested strategies.

`st.recursive(scalars, lambda kids: st.lists(kids) | st.dictionaries(keys, kids))` draws every
leaf through about six strategy layers (the one_of of its extension levels and that one_of's
branch sampler, a leaf-counting wrapper, the one_of of the scalars and its sampler, then the
scalar), and Hypothesis's per-draw bookkeeping, not the choices themselves, was most of the
time of the tests that draw such values. `json_values` makes the same kind of values with two
draws per leaf (what the node is, the scalar) and two per container (what it is, its size):

- the same values can be drawn: the same scalar strategies, containers of 0..max_size items,
  the same key strategy, at most max_leaves leaves;
- the same shape as st.recursive's: a value is one of L levels, drawn evenly -- level 0 a
  scalar, level k a list or a dict (evenly) whose items are of levels 0..k-1 -- with L as
  st.recursive computes it from max_leaves (5 for 10 leaves, 8 for 100);
- container sizes are drawn evenly from 0..max_size (st.lists' sizes lean to short ones);
  when the leaf budget runs out the containers being drawn stop growing (st.recursive throws
  the value away and draws it again), and a repeated dict key keeps its last value.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hypothesis import strategies as st

NULL: Any = object()  # a scalar "strategy" that is the value None, with no draw at all
LIST, DICT = -1, -2


def json_values(
    scalars: Sequence[st.SearchStrategy[Any] | Any],
    keys: st.SearchStrategy[str],
    *,
    max_size: int,
    max_leaves: int,
) -> st.SearchStrategy[Any]:
    levels = 2
    while 2 ** (levels - 1) <= max_leaves:  # st.recursive's number of extension levels
        levels += 1
    n = len(scalars)
    # What a node below `top` levels is, in one draw: a scalar of kind s, or a list or a dict of
    # level k. Each scalar kind is listed 2 times and each container n times, so that the draw
    # picks a level evenly, then a scalar kind or a container kind evenly, as st.recursive does.
    picks = [
        st.sampled_from([(0, s) for s in range(n)] * 2 + [(k, c) for k in range(1, top) for c in (LIST, DICT)] * n)
        for top in range(1, levels + 1)
    ]
    size_of = st.sampled_from(range(max_size + 1))

    @st.composite
    def value(draw: st.DrawFn) -> Any:
        leaves = max_leaves

        def node(top: int) -> Any:  # one value of a level below `top`
            nonlocal leaves
            level, kind = draw(picks[top - 1])
            if level == 0:
                leaves -= 1
                scalar = scalars[kind]
                return None if scalar is NULL else draw(scalar)
            size = draw(size_of)
            if kind == DICT:
                out: dict[str, Any] = {}
                for _ in range(size):
                    if leaves <= 0:
                        break
                    key = draw(keys)
                    out[key] = node(level)
                return out
            items: list[Any] = []
            for _ in range(size):
                if leaves <= 0:
                    break
                items.append(node(level))
            return items

        return node(levels)

    return value()


class Just:
    """A `pick` branch that is one value (what st.just(value) is in a one_of)."""

    def __init__(self, value: Any) -> None:
        self.value = value


_INDEXES: dict[int, st.SearchStrategy[int]] = {}


def pick(draw: st.DrawFn, branches: Sequence[st.SearchStrategy[Any] | Just]) -> Any:
    """`draw(st.one_of(branches))` inside a composite, without one_of's two draws around the
    branch: the branch is chosen as one_of chooses it (sampled_from over its branches), then
    drawn, and a `Just` branch costs no draw at all. `branches` are one_of's flattened branches
    (a one_of given to st.one_of counts as its own branches)."""
    branch = branches[draw(index(len(branches)))]
    return branch.value if isinstance(branch, Just) else draw(branch)


def index(n: int) -> st.SearchStrategy[int]:
    """st.sampled_from(range(n)), built once per n: how one_of picks one of n branches."""
    strategy = _INDEXES.get(n)
    if strategy is None:
        strategy = _INDEXES[n] = st.sampled_from(range(n))
    return strategy
