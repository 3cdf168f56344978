"""Size bounds on user-supplied constraints, checked before anything walks them recursively or
compiles them: a schema nested 100 levels deep made the meta-schema check raise RecursionError,
and a 100,000-value enum (1.3 MB) took xgrammar 17 s to convert. Real response formats and tool
schemas are far inside these bounds."""

from __future__ import annotations

import json
from typing import Any

from inference.protocol import InvalidRequestError

MAX_SCHEMA_BYTES = 64 * 1024  # the schema as compact JSON
MAX_SCHEMA_DEPTH = 32  # objects and arrays inside one another
MAX_ENUM_VALUES = 1024  # per `enum` (and per choice list)
MAX_PATTERN_CHARS = 64 * 1024  # a regex or EBNF grammar


def check_schema_bounds(schema: Any, what: str) -> None:
    """InvalidRequestError if `schema` is too deep, too large or holds too long an enum."""
    stack: list[tuple[Any, int]] = [(schema, 1)]
    while stack:  # iterative: the point is not to recurse through the user's nesting
        node, depth = stack.pop()
        if isinstance(node, dict):
            children = list(node.values())
            enum = node.get("enum")
            if isinstance(enum, list) and len(enum) > MAX_ENUM_VALUES:
                raise InvalidRequestError(
                    f"{what} has an enum of {len(enum)} values; at most {MAX_ENUM_VALUES} are allowed"
                )
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > MAX_SCHEMA_DEPTH:
            raise InvalidRequestError(f"{what} nests deeper than {MAX_SCHEMA_DEPTH} levels")
        stack.extend((child, depth + 1) for child in children)
    size = len(json.dumps(schema, separators=(",", ":")))
    if size > MAX_SCHEMA_BYTES:
        raise InvalidRequestError(f"{what} is {size} bytes as JSON; at most {MAX_SCHEMA_BYTES} are allowed")


def check_choices(choices: list[str], what: str) -> None:
    if len(choices) > MAX_ENUM_VALUES or sum(map(len, choices)) > MAX_PATTERN_CHARS:
        raise InvalidRequestError(
            f"{what}: at most {MAX_ENUM_VALUES} choices of {MAX_PATTERN_CHARS} characters in all"
        )


def check_pattern(text: str, what: str) -> None:
    if len(text) > MAX_PATTERN_CHARS:
        raise InvalidRequestError(f"{what} is {len(text)} characters; at most {MAX_PATTERN_CHARS}")
