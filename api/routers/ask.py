"""POST /v1/ask: grounded answers with citations, streamed or whole, in conversations."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from fastapi import APIRouter, Request
from sse_starlette import ServerSentEvent

from api.admission import admitted
from api.charging import admit_reserving, answer_worst_case, charging
from api.deps import CurrentPrincipal, ReadingTenant, StateDep
from api.disconnect import unless_disconnected
from api.metrics import admit_early, observed_route, recorded_answers
from api.schemas.ask import AskOut
from api.schemas.common import event_stream
from api.streaming import event_source, sse
from usecases.answer import Question, answer

router = APIRouter(prefix="/v1", tags=["ask"])


class AskBody(Question):
    stream: bool = False


@router.post(
    "/ask",
    response_model=AskOut,
    responses=event_stream(
        "With `stream`: `event: sources`, then `event: token` per piece of text, then `event: done` "
        "(this response's fields), each with its JSON as data; a failure midway ends with `event: error`."
    ),
)
async def ask(
    request: Request, body: AskBody, principal: CurrentPrincipal, tenant: ReadingTenant, state: StateDep
):
    """Answer a question from the collections' documents, citing the chunks it used."""
    slots = state.answer_slots
    admit_early(state, slots, "ask", tenant)
    worst = answer_worst_case(state.settings.qa, body.question, body.generation.max_tokens)
    held = await asyncio.to_thread(admit_reserving, request, principal, state, *worst)
    events = charging(
        admitted(recorded_answers(answer(state, tenant, body), state), slots, str(tenant)), held
    )
    events = observed_route(events, state, "ask", tenant)
    first = await anext(events)  # errors (unknown collection, bad overrides) surface as 4xx here
    if body.stream:

        async def stream() -> AsyncIterator[ServerSentEvent]:
            try:
                yield sse(first["type"], first)
                async for event in events:
                    yield sse(event["type"], event)
            finally:
                await events.aclose()  # the client gone: the answer's engine request and session end now

        return event_source(stream())

    async def whole() -> dict:
        try:
            return [event async for event in events if event["type"] == "done"][-1]
        finally:
            await events.aclose()  # cancelled (client gone): the engine request is aborted now

    done = await unless_disconnected(request, whole())
    return {
        **{k: v for k, v in done.items() if k != "type"},
        "query": first["query"],
        "sources": first["sources"],
        "context": first.get("context"),
    }
