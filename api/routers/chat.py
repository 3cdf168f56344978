"""POST /v1/chat/completions, OpenAI-compatible at the platform level.

`model: "agent/<react|rewoo|plan_execute>"` runs an agent on the task in the last user message over
the collections named in the extra `collections` field (all the tenant's when absent).
`model: "rag/<collection>"` runs the grounded question-answering pipeline on that collection (the
last user message is the question, earlier turns the history); citations ride along in an extra
`citations` field of the response and of the final stream chunk. Any other model name passes
through to the generator (the in-process engine or the configured remote server).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Literal

from fastapi import APIRouter
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from api.admission import admitted, answer_slots
from api.deps import ReadingTenant, StateDep
from api.errors import ApiError
from api.llm import chat_backend
from api.ratelimit import RateLimit, charging
from api.routers import agents
from api.routers.ask import AskBody, Generation, run_ask
from api.state import AppState
from api.streaming import ending_with_error_event
from api.validation import Seed
from core.tenancy import scope_to_tenant
from inference.grammar.spec import StructuredOutputSpec, parse_structured_output
from inference.protocol import InvalidRequestError, SamplingParams

router = APIRouter(prefix="/v1", tags=["chat"])

RAG_PREFIX = "rag/"
AGENT_PREFIX = "agent/"


class ChatMessage(BaseModel):
    role: str = Field(pattern="^(system|user|assistant)$")
    content: str


class ChatBody(BaseModel):
    # NOTE: extra fields are kept so that output constraints (response_format, tools, vLLM's
    # guided_*) are read and enforced or refused, never silently dropped.
    model_config = ConfigDict(extra="allow")

    model: str
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False
    max_tokens: int | None = Field(default=None, ge=1, le=4096)
    max_completion_tokens: int | None = Field(default=None, ge=1, le=4096)
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float = Field(default=1.0, gt=0, le=1)
    seed: Seed | None = None
    stop: str | list[str] | None = None
    collections: list[str] = Field(default_factory=list, description="For agent/<kind> models.")
    # rag/ models only (extra fields, as /v1/ask): how the answer is made and whether it is checked.
    answer_mode: Literal["quote", "generate", "auto"] | None = None
    claim_check: bool | None = None

    def output_constraint(self) -> StructuredOutputSpec | None:
        """The requested output constraint, validated (InvalidRequestError: 400)."""
        return parse_structured_output(self.model_extra or {})


def _ask_body(body: ChatBody, max_tokens: int | None) -> AskBody:
    collection = body.model.removeprefix(RAG_PREFIX)
    if not collection:
        raise ApiError(400, "model_not_found", "model 'rag/' names no collection: use rag/<collection>")
    try:
        return AskBody(
            question=body.messages[-1].content,
            collection=collection,
            generation=Generation(max_tokens=max_tokens, temperature=body.temperature, seed=body.seed),
            answer_mode=body.answer_mode,
            claim_check=body.claim_check,
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = first["loc"]
        where = "messages[-1].content" if loc[:1] == ("question",) else ".".join(map(str, loc))
        raise ApiError(422, "validation_error", f"{where}: {first['msg']}") from None


async def _events(state: AppState, tenant: uuid.UUID, body: ChatBody) -> AsyncIterator[dict]:
    """Pipeline-shaped events (`token`..., `done`) for either kind of model."""
    max_tokens = body.max_completion_tokens or body.max_tokens
    try:
        constraint = body.output_constraint()
    except InvalidRequestError as exc:
        raise ApiError(400, "invalid_request", str(exc)) from exc
    if body.model.startswith(AGENT_PREFIX):
        if body.messages[-1].role != "user":
            raise ApiError(400, "invalid_messages", "the last message must be the user's task")
        kind, task = body.model.removeprefix(AGENT_PREFIX), body.messages[-1].content
        async for event in agents.chat_events(state, tenant, kind, task, body.collections):
            yield event
        return
    if body.model.startswith(RAG_PREFIX):
        if body.messages[-1].role != "user":
            raise ApiError(400, "invalid_messages", "the last message must be the user's question")
        if constraint is not None:
            raise ApiError(
                400,
                "unsupported_constraint",
                "rag/ models answer in text with citations; "
                "response_format, tools and guided_* are not supported for them",
            )
        turns = [m.model_dump() for m in body.messages[:-1] if m.role != "system"]
        ask = _ask_body(body, max_tokens)
        session = state.sessions()
        scope_to_tenant(session, tenant)
        try:
            async for event in run_ask(state, session, tenant, ask, history_override=turns, persist=False):
                yield event
        finally:
            session.close()
        return
    if constraint is not None and constraint.kind == "tools":
        raise ApiError(
            400,
            "unsupported_constraint",
            "tools are not supported by the platform's chat "
            "endpoint; call the engine server (`groundwork engine serve`) for tool calls",
        )
    backend = chat_backend(state, cache_salt=str(tenant))
    if body.model != backend.model_name:
        raise ApiError(
            400,
            "model_not_found",
            f"unknown model {body.model!r}: use {backend.model_name!r}, rag/<collection> or agent/<kind>",
        )
    if constraint is not None and not getattr(backend, "enforces_grammar", False):
        raise ApiError(
            400,
            "unsupported_constraint",
            "response_format and guided_* are enforced with the in-process engine or the supervised "
            "vLLM only; this generator is a server not known to apply them: call it directly",
        )
    stop = [body.stop] if isinstance(body.stop, str) else (body.stop or [])
    params = SamplingParams(
        max_tokens=max_tokens or 256,
        temperature=1.0 if body.temperature is None else body.temperature,
        top_p=body.top_p,
        seed=body.seed,
        stop=stop,
        structured_output=constraint,
        cache_salt=str(tenant),
    )
    try:
        params.validate()
    except InvalidRequestError as exc:
        raise ApiError(400, "invalid_request", str(exc)) from exc
    async for delta in backend.stream_chat([m.model_dump() for m in body.messages], params):
        if delta.text:
            yield {"type": "token", "text": delta.text}
        if delta.finished:
            usage = delta.usage.as_dict() if delta.usage else {}
            yield {"type": "done", "finish_reason": delta.finish_reason, "usage": usage}


def _chunk(cid: str, created: int, model: str, delta: dict, finish_reason=None, **extra) -> str:
    body = {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        **extra,
    }
    return f"data: {json.dumps(body)}\n\n"


@router.post("/chat/completions")
async def chat_completions(body: ChatBody, tenant: ReadingTenant, state: StateDep, meter: RateLimit):
    """OpenAI chat completions; `rag/<collection>` answers from that collection with citations."""
    cid, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())
    events = charging(admitted(_events(state, tenant, body), answer_slots(state)), meter)
    first = await anext(events)  # 4xx errors surface before any byte is sent
    if body.stream:

        async def stream() -> AsyncIterator[str]:
            yield _chunk(cid, created, body.model, {"role": "assistant", "content": ""})
            async for event in _prepend(first, events):
                if event["type"] == "token":
                    yield _chunk(cid, created, body.model, {"content": event["text"]})
                elif event["type"] == "done":
                    extra = {"usage": event["usage"], **_rag_fields(event)}
                    yield _chunk(cid, created, body.model, {}, event["finish_reason"], **extra)
            yield "data: [DONE]\n\n"

        return StreamingResponse(ending_with_error_event(stream()), media_type="text/event-stream")
    text, done = [], {}
    async for event in _prepend(first, events):
        if event["type"] == "token":
            text.append(event["text"])
        elif event["type"] == "done":
            done = event
    content = done.get("answer", "".join(text))
    response = {
        "id": cid,
        "object": "chat.completion",
        "created": created,
        "model": body.model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": done.get("finish_reason") or "stop",
            }
        ],
        "usage": done.get("usage", {}),
    }
    return response | _rag_fields(done)


RAG_FIELDS = ("citations", "answer_mode_used", "quote_method", "fallback", "claims")


def _rag_fields(done: dict) -> dict:
    """The grounded-answer extras of a rag/ model's final event (none for plain models)."""
    return {key: done[key] for key in RAG_FIELDS if key in done}


async def _prepend(first: dict, rest: AsyncIterator[dict]) -> AsyncIterator[dict]:
    yield first
    async for event in rest:
        yield event
