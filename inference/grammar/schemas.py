"""Checks on user-supplied JSON schemas before they become grammars."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import jsonschema

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
