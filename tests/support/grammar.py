"""Where the in-process engine builds grammars: never on a thread running an event loop (every
request on that loop would wait for the build; AsyncLLMEngine.precompile)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager


def _on_a_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


@contextmanager
def grammar_builds(engine) -> Iterator[list[bool]]:
    """For each grammar `engine` (an AsyncLLMEngine) compiles meanwhile: whether an event loop was
    running on the thread that compiled it."""
    service = engine.engine.grammars().service
    compiler, on_loop = service._compiler, []

    class Recording:
        def compile_grammar(self, grammar):
            on_loop.append(_on_a_loop())
            return compiler.compile_grammar(grammar)

    service._compiler = Recording()
    try:
        yield on_loop
    finally:
        service._compiler = compiler
