"""A seeded generator of random JSON schemas covering what structured output must handle."""

from __future__ import annotations

import random
from typing import Any

_WORDS = ["id", "name", "city", "tags", "score", "items", "owner", "active", "note", "level", "kind", "meta"]


def random_schema(rng: random.Random, depth: int = 3) -> dict[str, Any]:
    """A schema whose root is an object (the common structured-output case)."""
    return _object(rng, depth)


def _any(rng: random.Random, depth: int) -> dict[str, Any]:
    makers = [_string, _integer, _number, _boolean, _null, _enum]
    if depth > 0:
        makers += [_object, _array, _object, _array]
    return rng.choice(makers)(rng, depth - 1)


def _object(rng: random.Random, depth: int) -> dict[str, Any]:
    names = rng.sample(_WORDS, rng.randint(1, 4))
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {name: _any(rng, depth) for name in names},
        "required": [n for n in names if rng.random() < 0.6],
    }
    if rng.random() < 0.5:
        schema["additionalProperties"] = False
    return schema


def _array(rng: random.Random, depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "array", "items": _any(rng, depth)}
    if rng.random() < 0.7:
        low = rng.randint(0, 2)
        schema["minItems"] = low
        schema["maxItems"] = low + rng.randint(0, 3)
    return schema


def _string(rng: random.Random, depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    roll = rng.random()
    if roll < 0.6:
        schema["maxLength"] = rng.randint(1, 12)
    if 0.3 < roll < 0.8:
        schema["minLength"] = rng.randint(0, schema.get("maxLength", 5))
    return schema


def _integer(rng: random.Random, depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "integer"}
    if rng.random() < 0.7:
        low = rng.randint(-1000, 1000)
        schema["minimum"] = low
        schema["maximum"] = low + rng.randint(0, 5000)
    return schema


def _number(rng: random.Random, depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "number"}
    if rng.random() < 0.7:
        low = round(rng.uniform(-100, 100), 2)
        schema["minimum"] = low
        schema["maximum"] = round(low + rng.uniform(0.5, 1000), 2)
    return schema


def _boolean(rng: random.Random, depth: int) -> dict[str, Any]:
    return {"type": "boolean"}


def _null(rng: random.Random, depth: int) -> dict[str, Any]:
    return {"type": "null"}


def _enum(rng: random.Random, depth: int) -> dict[str, Any]:
    pool: list[Any] = ["red", "green", "blue", 'say "hi"', "a\\b", 1, 2.5, -3, True, None]
    return {"enum": rng.sample(pool, rng.randint(2, 4))}
