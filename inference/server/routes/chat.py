"""POST /v1/chat/completions: messages rendered with the model's chat template."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

from fastapi import APIRouter, Request, Response
from jinja2 import TemplateError

from inference.chat_template import python_messages
from inference.grammar import ToolCallParser, parse_tool_calls
from inference.grammar.python_call_parser import PythonCallParser, parse_python_turn
from inference.protocol import RequestOutput, SamplingParams
from inference.server.deps import ContextDep, ServerContext
from inference.server.errors import APIError
from inference.server.generation import (
    CLIENT_CLOSED_REQUEST,
    Completed,
    collect,
    engine_stream,
    stream_response,
    unless_disconnected,
    usage_of,
)
from inference.server.logprobs import chat_logprobs
from inference.server.schemas.chat import (
    AssistantMessage,
    ChatChoice,
    ChatChunkChoice,
    ChatCompletionChunk,
    ChatCompletionRequest,
    ChatCompletionResponse,
)
from inference.server.schemas.common import Usage
from inference.tool_relevance import declines_tools

router = APIRouter(tags=["chat"])


def _prompt_ids(ctx: ServerContext, body: ChatCompletionRequest) -> list[int]:
    messages = [message.as_template_dict() for message in body.messages]
    # With tool_choice "none" the output is unconstrained: a model told how to call would write calls as text.
    tools = body.tools if body.tool_choice != "none" else None
    if tools and ctx.tool_call_format == "python":
        messages, tools = python_messages(messages, tools), None
    try:
        return ctx.engine.apply_chat_template(messages, tools=tools)
    except (TemplateError, ValueError) as exc:
        # Templates reject what they cannot render (e.g. roles out of order) by raising.
        raise APIError(f"the messages do not fit the model's chat template: {exc}", param="messages") from exc


def _prepared(ctx: ServerContext, body: ChatCompletionRequest) -> tuple[list[int], SamplingParams]:
    prompt_ids = _prompt_ids(ctx, body)
    params = ctx.sampling_params(body, prompt_ids, body.requested_max_tokens, body.num_logprobs, "messages")
    return prompt_ids, params


async def _no_tool_fits(ctx: ServerContext, body: ChatCompletionRequest, params: SamplingParams) -> bool:
    """An "auto" turn whose tools the model judges unfit (inference/tool_relevance.py); checked once
    the request is valid, under its cache salt."""
    spec = params.structured_output
    if ctx.tool_relevance is None or spec is None or spec.kind != "tools" or spec.tool_choice[0] != "auto":
        return False
    messages = [message.as_template_dict() for message in body.messages]
    return await declines_tools(
        ctx.engine, messages, body.tools, ctx.tool_call_format, ctx.tool_relevance, params.cache_salt
    )


def _finish_reason(engine_reason: str | None, called_tools: bool) -> str | None:
    # A model that stopped after writing tool calls is waiting for their results, as OpenAI says.
    return "tool_calls" if engine_reason == "stop" and called_tools else engine_reason


class _ChatRenderer:
    """Turns one request's engine outputs into chat responses or chunks (tool calls parsed out)."""

    def __init__(self, ctx: ServerContext, params: SamplingParams) -> None:
        self.ctx = ctx
        self.id = f"chatcmpl-{uuid.uuid4().hex}"
        self.created = int(time.time())
        self.want_logprobs = params.logprobs is not None
        spec = params.structured_output
        self.tool_parser: ToolCallParser | PythonCallParser | None = None
        self.python = spec is not None and spec.tool_format == "python"
        if spec is not None and spec.produces_tool_calls:
            self.tool_parser = PythonCallParser() if self.python else ToolCallParser()

    def chunk(self, choices: list[ChatChunkChoice], usage: Usage | None = None) -> ChatCompletionChunk:
        return ChatCompletionChunk(
            id=self.id, created=self.created, model=self.ctx.model_name, choices=choices, usage=usage
        )

    def role_chunk(self) -> ChatCompletionChunk:
        return self.chunk([ChatChunkChoice(delta={"role": "assistant", "content": ""})])

    def usage_chunk(self, usage: Usage) -> ChatCompletionChunk:
        return self.chunk([], usage)

    def chunks(self, output: RequestOutput) -> Iterator[ChatCompletionChunk]:
        delta: dict = {"content": output.new_text} if output.new_text else {}
        finish_reason = output.finish_reason
        if self.tool_parser is not None:
            parsed = self.tool_parser.feed(output.new_text)
            if output.finished:
                end = self.tool_parser.finish()
                parsed.content += end.content
                parsed.tool_calls += end.tool_calls
                finish_reason = _finish_reason(finish_reason, bool(self.tool_parser.result().tool_calls))
            delta = {"content": parsed.content} if parsed.content else {}
            if parsed.tool_calls:
                delta["tool_calls"] = parsed.tool_calls
        # NOTE: a delta can carry a token but no text yet (held back: partial UTF-8, a possible stop
        # string or tool-call tag); its logprobs still go out now.
        if delta or output.logprobs or output.finished:
            logprobs = chat_logprobs(self.ctx.engine, output.logprobs) if output.logprobs else None
            yield self.chunk([ChatChunkChoice(delta=delta, logprobs=logprobs, finish_reason=finish_reason)])

    def response(self, done: Completed) -> ChatCompletionResponse:
        message, finish_reason = AssistantMessage(content=done.text), done.finish_reason
        if self.tool_parser is not None:
            parsed = (parse_python_turn if self.python else parse_tool_calls)(done.text)
            message = AssistantMessage(content=parsed.content, tool_calls=parsed.tool_calls or None)
            finish_reason = _finish_reason(finish_reason, bool(parsed.tool_calls))
        choice = ChatChoice(
            message=message,
            logprobs=chat_logprobs(self.ctx.engine, done.logprobs) if self.want_logprobs else None,
            finish_reason=finish_reason,
        )
        return ChatCompletionResponse(
            id=self.id,
            created=self.created,
            model=self.ctx.model_name,
            choices=[choice],
            usage=usage_of(done.last),
        )


@router.post("/v1/chat/completions", response_model=ChatCompletionResponse)
async def create_chat_completion(body: ChatCompletionRequest, request: Request, ctx: ContextDep) -> Response:
    ctx.check_model(body.model)
    prompt_ids, params = _prepared(ctx, body)
    if await _no_tool_fits(ctx, body, params):
        body = body.model_copy(update={"tool_choice": "none"})
        prompt_ids, params = _prepared(ctx, body)
    renderer = _ChatRenderer(ctx, params)
    outputs = engine_stream(ctx, renderer.id, prompt_ids, params)
    if body.stream:
        usage_chunk = renderer.usage_chunk if body.include_usage else None
        return await stream_response(
            request, outputs, renderer.chunks, usage_chunk, prelude=[renderer.role_chunk()]
        )
    done = await unless_disconnected(request, collect(outputs))
    if done is None:
        return Response(status_code=CLIENT_CLOSED_REQUEST)
    return Response(renderer.response(done).model_dump_json(), media_type="application/json")
