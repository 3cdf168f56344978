"""POST /v1/completions: a raw prompt (text or token ids) continued."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

from fastapi import APIRouter, Request, Response

from inference.protocol import RequestOutput
from inference.server.deps import ContextDep
from inference.server.generation import (
    CLIENT_CLOSED_REQUEST,
    collect,
    engine_stream,
    stream_response,
    unless_disconnected,
    usage_of,
)
from inference.server.logprobs import completion_logprobs
from inference.server.schemas.completions import CompletionChoice, CompletionRequest, CompletionResponse

router = APIRouter(tags=["completions"])


@router.post("/v1/completions", response_model=CompletionResponse)
async def create_completion(body: CompletionRequest, request: Request, ctx: ContextDep) -> Response:
    ctx.check_model(body.model)
    prompt_ids = ctx.engine.encode(body.prompt) if isinstance(body.prompt, str) else list(body.prompt)
    params = ctx.sampling_params(body, prompt_ids, body.max_tokens, body.logprobs, "prompt")
    request_id = f"cmpl-{uuid.uuid4().hex}"
    created = int(time.time())
    outputs = engine_stream(ctx, request_id, prompt_ids, params)

    def response(choice: CompletionChoice | None, **usage) -> CompletionResponse:
        return CompletionResponse(
            id=request_id, created=created, model=ctx.model_name, choices=[choice] if choice else [], **usage
        )

    if body.stream:
        text_offset = 0

        def render(output: RequestOutput) -> Iterator[CompletionResponse]:
            nonlocal text_offset
            if output.new_text or output.logprobs or output.finished:
                logprobs = None
                if params.logprobs is not None:
                    logprobs = completion_logprobs(ctx.engine, output.logprobs or [], text_offset)
                text_offset += len(output.new_text)
                yield response(
                    CompletionChoice(
                        text=output.new_text, logprobs=logprobs, finish_reason=output.finish_reason
                    )
                )

        usage_chunk = (lambda usage: response(None, usage=usage)) if body.include_usage else None
        return await stream_response(request, outputs, render, usage_chunk)

    done = await unless_disconnected(request, collect(outputs))
    if done is None:
        return Response(status_code=CLIENT_CLOSED_REQUEST)
    logprobs = completion_logprobs(ctx.engine, done.logprobs, 0) if params.logprobs is not None else None
    choice = CompletionChoice(text=done.text, logprobs=logprobs, finish_reason=done.finish_reason)
    body_json = response(choice, usage=usage_of(done.last)).model_dump_json()
    return Response(body_json, media_type="application/json")
