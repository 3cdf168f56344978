"""STUB until the h-platform merge (replaced by its Platform)."""

from __future__ import annotations

from typing import Any

Platform = Any
