"""The filter tree (``ragloom.filters``) translated to a ``weaviate.classes.query.Filter``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ragloom.filters import AllOf, Node, Not


def to_weaviate(node: Node | None) -> Any:
    """The Weaviate filter for a tree (None for None)."""
    if node is None:
        return None
    from weaviate.classes.query import Filter

    if isinstance(node, AllOf):
        return Filter.all_of([to_weaviate(c) for c in node.children])
    if isinstance(node, Not):
        return Filter.not_(to_weaviate(node.child))
    if node.op == "eq":
        return Filter.by_property(node.prop).equal(node.value)
    if node.op == "in":
        # an OR of equals works for every data type (ContainsAny compares tokens of text)
        return Filter.any_of([Filter.by_property(node.prop).equal(v) for v in node.value])
    if node.op == "contains":
        return Filter.any_of([Filter.by_property(node.prop).like(f"*{v}*") for v in node.value])
    prop = Filter.by_property(node.prop)
    method: Callable[[Any], Any] = {"gt": prop.greater_than, "gte": prop.greater_or_equal, "lt": prop.less_than,
                                    "lte": prop.less_or_equal}[node.op]
    return method(node.value)
