"""Answers and searches hold the cores while they retrieve (inference/foreground.py).

Under one tenant's agent runs an in-process engine on CPU keeps every core busy, and another
tenant's ask, which only embeds a query, reads the database and ranks sentences, took twice its
unloaded time. While an admitted answer or search runs, this ASGI middleware holds the provider's
`Foreground`: the engine pauses between steps and layers (for a bounded share of its time) until
the request ends or queues its own generation. Refused requests never get here (it sits inside the
body guard and the early refusal) and hold nothing.

The engine steps aside for tenants with nothing in it: a request whose tenant already holds answer
slots (answers running, or its agent runs' LLM calls: api/admission.py) holds nothing. Under one
tenant's flood of asks and agent runs its own asks' holds drained the pause allowance, and another
tenant's ask then found the engine running (`python -m benchmarks.fairness`); and a tenant's search
pausing that same tenant's generation only reorders its own work. That busy tenant's requests wait
for the holds instead (`Foreground.yield_to_holds`, at most a quarter second): under its flood, its
polls and asks kept the one event loop another tenant's ask needs.
"""

from __future__ import annotations

import re

from starlette.types import ASGIApp, Receive, Scope, Send

from api.early_refusal import header_tenant

_HOLDING = re.compile(r"/v1/(ask|chat/completions|collections/[^/]+/search)")


class ForegroundHold:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        state = getattr(scope["app"].state, "groundwork", None) if scope["type"] == "http" else None
        if state is None or not scope["path"].startswith("/v1/"):
            return await self.app(scope, receive, send)
        tenant, slots = header_tenant(state, scope), state.answer_slots
        if tenant is not None and slots is not None and slots.per_tenant[str(tenant)] > 0:
            await state.llm.foreground.yield_to_holds()
            return await self.app(scope, receive, send)
        if scope["method"] != "POST" or not _HOLDING.fullmatch(scope["path"]):
            return await self.app(scope, receive, send)
        with state.llm.foreground.holding():
            await self.app(scope, receive, send)
