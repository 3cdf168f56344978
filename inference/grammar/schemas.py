"""Checks on user-supplied JSON schemas before they become grammars."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import jsonschema

from inference.grammar.bounds import check_schema_bounds
from inference.protocol import InvalidRequestError

# Where JSON Schema nests subschemas (other keys hold data or annotations).
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})
_SCHEMA_LISTS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
_SCHEMA_VALUES = frozenset(
    {
        "items",
        "additionalItems",
        "additionalProperties",
        "unevaluatedItems",
        "unevaluatedProperties",
        "propertyNames",
        "contains",
        "not",
        "if",
        "then",
        "else",
    }
)
_LENGTH_KEYWORDS = ("minLength", "maxLength")


def check_json_schema(schema: Any, what: str) -> None:
    """Validate `schema` against its meta-schema (draft 2020-12 unless it declares `$schema`)."""
    if not isinstance(schema, dict | bool):
        raise InvalidRequestError(f"{what} must be a JSON object, got {type(schema).__name__}")
    check_schema_bounds(schema, what)
    validator = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        path = "/".join(str(p) for p in exc.absolute_path) or "<root>"
        raise InvalidRequestError(f"{what} is not a valid JSON schema at {path}: {exc.message}") from exc


def unenforceable_constraints(schema: Any) -> list[str]:
    """Constraints in `schema` the grammar cannot enforce (xgrammar drops them with a warning).

    A strict request must not silently get output that violates its schema, so these are rejected
    there; a non-strict one is served best effort.
    """
    problems = []
    for path, node in _subschemas(schema, "#"):
        lengths = [k for k in _LENGTH_KEYWORDS if k in node]
        for combined in ("pattern", "format"):
            if lengths and combined in node:
                problems.append(f"{path}: {combined} combined with {'/'.join(lengths)}")
    return problems


def _subschemas(schema: Any, path: str) -> Iterator[tuple[str, dict]]:
    if not isinstance(schema, dict):
        return
    yield path, schema
    for key, value in schema.items():
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            for name, sub in value.items():
                yield from _subschemas(sub, f"{path}/{key}/{name}")
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            for i, sub in enumerate(value):
                yield from _subschemas(sub, f"{path}/{key}/{i}")
        elif key in _SCHEMA_VALUES:
            yield from _subschemas(value, f"{path}/{key}")


def _unsatisfiable(node: Any) -> str | None:
    """Why no value can satisfy `node`, for the contradiction tool schemas in the wild contain:
    `enum`/`const` values none of which has the declared `type` (BFCL: an array-typed parameter
    with an enum of strings); None when it can be satisfied as far as this checks."""
    if not isinstance(node, dict) or "type" not in node or not ("enum" in node or "const" in node):
        return None
    values = node.get("enum", [node.get("const")])
    check = jsonschema.Draft202012Validator({"type": node["type"]})
    if isinstance(values, list) and not any(check.is_valid(v) for v in values):
        return f"none of its enum/const values is of type {node['type']}"
    return None


def drop_unsatisfiable(schema: Any, what: str) -> Any:
    """`schema` without the optional properties no value can satisfy (an error for a required one).

    NOTE: xgrammar compiles such a property to its enum alone, so a "constrained" call could carry a
    value that fails the schema (seen on BFCL live_multiple); left out, it can never be emitted, and
    every call stays valid by construction. Extra properties are then closed off explicitly.
    """
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    properties = schema.get("properties")
    if isinstance(properties, dict):
        kept = {}
        for name, sub in properties.items():
            reason = _unsatisfiable(sub)
            if reason is None:
                kept[name] = drop_unsatisfiable(sub, f"{what}.{name}")
            elif name in (schema.get("required") or []):
                raise InvalidRequestError(f"{what}.{name} can never be satisfied: {reason}")
        if len(kept) < len(properties):
            out["additionalProperties"] = False
        out["properties"] = kept
    if isinstance(schema.get("items"), dict):
        out["items"] = drop_unsatisfiable(schema["items"], f"{what}[]")
    return out
