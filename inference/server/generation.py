"""Running one request through the engine on behalf of an HTTP client.

The engine must never keep generating for a client that is gone: every way a request can end early
(client disconnect before or during the stream, an error while rendering) leads to `engine.abort`.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TypeVar

import anyio
from fastapi import Request
from fastapi.responses import Response
from pydantic import BaseModel
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.background import BackgroundTask

from inference.protocol import EngineError, RequestOutput, SamplingParams, TokenLogprob
from inference.server.deps import ServerContext
from inference.server.errors import error_payload
from inference.server.schemas.common import PromptTokensDetails, Usage

log = logging.getLogger(__name__)
T = TypeVar("T")

# nginx's code for "client closed request"; nobody reads it, but logs show why the request ended.
CLIENT_CLOSED_REQUEST = 499


async def engine_stream(
    ctx: ServerContext, request_id: str, prompt_ids: list[int], params: SamplingParams
) -> AsyncIterator[RequestOutput]:
    """The engine's deltas for one request, timed for metrics; aborts the request if left unfinished."""
    if params.structured_output is not None:
        await ctx.engine.precompile(params.structured_output)
    timer = ctx.metrics.track()
    # Admission errors (400, 503) are raised here, before there is anything to abort.
    outputs = ctx.engine.generate(request_id, prompt_ids, params)
    finished = False
    try:
        async for output in outputs:
            timer.observe(output)
            finished = output.finished
            yield output
    finally:
        if not finished:
            timer.abandon()
            # NOTE: shielded because this runs while the request's task is being cancelled.
            with anyio.CancelScope(shield=True):
                await ctx.engine.abort(request_id)


async def _client_gone(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def unless_disconnected(request: Request, work: Awaitable[T]) -> T | None:
    """Await `work`, cancelling it if the client disconnects first (then None)."""
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_client_gone(request))
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
        if not task.done():
            task.cancel()
            with anyio.CancelScope(shield=True):
                await asyncio.gather(task, return_exceptions=True)
    return None if task.cancelled() else task.result()


@dataclass
class Completed:
    """A whole request's outputs, for non-streaming responses."""

    text: str = ""
    logprobs: list[TokenLogprob] = field(default_factory=list)
    finish_reason: str | None = None
    last: RequestOutput | None = None


async def collect(outputs: AsyncIterator[RequestOutput]) -> Completed:
    done = Completed()
    parts: list[str] = []
    async for output in outputs:
        parts.append(output.new_text)
        done.logprobs.extend(output.logprobs or [])
        done.finish_reason = output.finish_reason
        done.last = output
    done.text = "".join(parts)
    return done


def usage_of(output: RequestOutput) -> Usage:
    return Usage(
        prompt_tokens=output.num_prompt_tokens,
        completion_tokens=output.num_output_tokens,
        total_tokens=output.num_prompt_tokens + output.num_output_tokens,
        prompt_tokens_details=PromptTokensDetails(cached_tokens=output.num_cached_tokens),
    )


async def _prepend(first: RequestOutput, rest: AsyncIterator[RequestOutput]) -> AsyncIterator[RequestOutput]:
    yield first
    async for output in rest:
        yield output


def _event(payload: BaseModel | dict | str) -> ServerSentEvent:
    if isinstance(payload, BaseModel):
        payload = payload.model_dump_json()
    body = payload if isinstance(payload, str) else json.dumps(payload)
    return ServerSentEvent(data=body, sep="\n")


async def _events(
    outputs: AsyncIterator[RequestOutput],
    prelude: Iterable[BaseModel],
    render: Callable[[RequestOutput], Iterable[BaseModel]],
    usage_chunk: Callable[[Usage], BaseModel] | None,
) -> AsyncIterator[ServerSentEvent]:
    for chunk in prelude:
        yield _event(chunk)
    last = None
    try:
        async for output in outputs:
            last = output
            for chunk in render(output):
                yield _event(chunk)
    except EngineError as exc:
        # The status line is long gone: report the failure in-band, as OpenAI does.
        yield _event(error_payload(str(exc), "engine_error"))
    except Exception as exc:
        log.exception("stream failed midway")
        yield _event(error_payload(f"internal error: {exc}", "internal_server_error"))
    else:
        if usage_chunk is not None and last is not None:
            yield _event(usage_chunk(usage_of(last)))
    yield _event("[DONE]")


async def stream_response(
    request: Request,
    outputs: AsyncIterator[RequestOutput],
    render: Callable[[RequestOutput], Iterable[BaseModel]],
    usage_chunk: Callable[[Usage], BaseModel] | None,
    prelude: Iterable[BaseModel] = (),
) -> Response:
    """An SSE response of `outputs` in OpenAI's chunk format, ending with `data: [DONE]` (framed by
    sse-starlette, which also pings idle streams and notices a client that went away).

    The first delta is awaited before answering so that admission errors (queue full, invalid
    request) still get a proper status code instead of a 200 followed by an in-band error.
    """
    first = await unless_disconnected(request, anext(outputs))
    if first is None:
        return Response(status_code=CLIENT_CLOSED_REQUEST)
    events = _events(_prepend(first, outputs), prelude, render, usage_chunk)
    # NOTE: if the client disconnects while a chunk is being sent, the body generators are left
    # suspended rather than closed; closing `outputs` afterwards is what aborts the engine request.
    return EventSourceResponse(events, background=BackgroundTask(outputs.aclose), sep="\n")
