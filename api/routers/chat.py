"""POST /v1/chat/completions, OpenAI-compatible at the platform level.

`model: "agent/<react|rewoo|plan_execute>"` runs an agent on the task in the last user message over
the collections named in the extra `collections` field (all the tenant's when absent).
`model: "rag/<collection>"` runs the grounded question-answering pipeline on that collection (the
last user message is the question, earlier turns the history); citations ride along in an extra
`citations` field of the response and of the final stream chunk. Any other model name passes
through to the generator (the in-process engine or the configured remote server).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from typing import Literal

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sse_starlette import ServerSentEvent

from api.admission import admitted
from api.agent_runner import agent_gate
from api.charging import admit_reserving, answer_worst_case, charging, estimate_tokens
from api.chat_limits import build_constraint, check_openai_parameters, precompile
from api.deps import CurrentPrincipal, ReadingTenant, StateDep
from api.disconnect import unless_disconnected
from api.metrics import admit_early, observed_route, recorded_answers
from api.ratelimit import Meter
from api.schemas.chat import PlatformChatChunk, PlatformChatCompletion
from api.schemas.common import event_stream
from api.state import AppState
from api.streaming import event_source, sse
from core.errors import ClientError
from core.offload import off_loop
from inference.client import LocalChatBackend
from inference.protocol import InvalidRequestError, SamplingParams
from inference.server.schemas.chat import AssistantMessage, ChatChoice, ChatChunkChoice
from inference.server.schemas.common import Usage
from usecases.agent_runs import RunRequest
from usecases.agent_segments import chat_events
from usecases.answer import Generation, Question, answer
from usecases.validation import Seed

router = APIRouter(prefix="/v1", tags=["chat"])

RAG_PREFIX = "rag/"
AGENT_PREFIX = "agent/"


class ChatMessage(BaseModel):
    role: str = Field(pattern="^(system|user|assistant)$")
    content: str = Field(max_length=200_000)


class ChatBody(BaseModel):
    # NOTE: extra fields are kept so that output constraints (response_format, tools, vLLM's
    # guided_*) are read and enforced or refused, never silently dropped.
    model_config = ConfigDict(extra="allow")

    model: str
    messages: list[ChatMessage] = Field(min_length=1, max_length=1000)
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


def _question(body: ChatBody, max_tokens: int | None) -> Question:
    collection = body.model.removeprefix(RAG_PREFIX)
    if not collection:
        raise ClientError(400, "model_not_found", "model 'rag/' names no collection: use rag/<collection>")
    try:
        return Question(
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
        raise ClientError(422, "validation_error", f"{where}: {first['msg']}") from None


async def _events(state: AppState, tenant: uuid.UUID, body: ChatBody, meter: Meter) -> AsyncIterator[dict]:
    """Pipeline-shaped events (`token`..., `done`) for either kind of model."""
    max_tokens = body.max_completion_tokens or body.max_tokens
    check_openai_parameters(body.model_extra or {})
    constraint = await build_constraint(body.model_extra or {})
    if body.model.startswith(AGENT_PREFIX):
        if body.messages[-1].role != "user":
            raise ClientError(400, "invalid_messages", "the last message must be the user's task")
        kind, task = body.model.removeprefix(AGENT_PREFIX), body.messages[-1].content
        try:  # the run's own bounds on its task, as a 422 here rather than inside the run
            request = RunRequest(input=task, collections=body.collections)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = "messages[-1].content" if first["loc"][:1] == ("input",) else "collections"
            raise ClientError(422, "validation_error", f"{where}: {first['msg']}") from None
        gate = agent_gate(state, meter, tenant)
        async for event in chat_events(state, state.agent_runner, tenant, kind, request, gate):
            yield event
        return
    if body.model.startswith(RAG_PREFIX):
        if body.messages[-1].role != "user":
            raise ClientError(400, "invalid_messages", "the last message must be the user's question")
        if constraint is not None:
            raise ClientError(
                400,
                "unsupported_constraint",
                "rag/ models answer in text with citations; "
                "response_format, tools and guided_* are not supported for them",
            )
        turns = [m.model_dump() for m in body.messages[:-1] if m.role != "system"]
        question = _question(body, max_tokens)
        async for event in recorded_answers(answer(state, tenant, question, turns, persist=False), state):
            yield event
        return
    if constraint is not None and constraint.kind == "tools":
        raise ClientError(
            400,
            "unsupported_constraint",
            "tools are not supported by the platform's chat "
            "endpoint; call the engine server (`groundwork engine serve`) for tool calls",
        )
    backend = await off_loop(state.llm.backend, str(tenant))  # the first call loads the generator
    if body.model != backend.model_name:
        raise ClientError(
            400,
            "model_not_found",
            f"unknown model {body.model!r}: use {backend.model_name!r}, rag/<collection> or agent/<kind>",
        )
    if constraint is not None and not getattr(backend, "enforces_grammar", False):
        raise ClientError(
            400,
            "unsupported_constraint",
            "response_format and guided_* are enforced with the in-process engine or the supervised "
            "vLLM only; this generator is a server not known to apply them: call it directly",
        )
    if constraint is not None and isinstance(backend, LocalChatBackend):  # a vLLM compiles its own
        await precompile(backend.engine, constraint)
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
        raise ClientError(400, "invalid_request", str(exc)) from exc
    async for delta in backend.stream_chat([m.model_dump() for m in body.messages], params):
        if delta.text:
            yield {"type": "token", "text": delta.text}
        if delta.finished:
            usage = delta.usage.as_dict() if delta.usage else {}
            yield {"type": "done", "finish_reason": delta.finish_reason, "usage": usage}


def _usage(usage: dict) -> Usage:
    """The event's usage as OpenAI's object (zeros where the backend reported none)."""
    return Usage.model_validate({"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0, **usage})


def _chunk(cid: str, created: int, model: str, delta: dict, finish_reason=None, **extra) -> ServerSentEvent:
    choice = ChatChunkChoice(delta=delta, finish_reason=finish_reason)
    body = PlatformChatChunk(id=cid, created=created, model=model, choices=[choice], **extra)
    return sse(None, body.model_dump_json())


def _worst_case(state: AppState, body: ChatBody) -> tuple[int, int]:
    """The prompt and completion tokens to reserve (api/charging.py). Agent runs reserve none here:
    each of their LLM calls is charged as it is made."""
    if body.model.startswith(AGENT_PREFIX):
        return 0, 0
    text = "".join(m.content for m in body.messages)
    asked = body.max_completion_tokens or body.max_tokens
    if body.model.startswith(RAG_PREFIX):
        return answer_worst_case(state.settings.qa, text, asked)
    return estimate_tokens(text), asked or 256


@router.post(
    "/chat/completions",
    response_model=PlatformChatCompletion,
    responses=event_stream(
        "With `stream`: `data: <chat.completion.chunk JSON>` per piece of text, the last chunk with "
        "`finish_reason`, `usage` (and a rag/ model's citations), then `data: [DONE]`."
    ),
)
async def chat_completions(
    request: Request, body: ChatBody, principal: CurrentPrincipal, tenant: ReadingTenant, state: StateDep
):
    """OpenAI chat completions; `rag/<collection>` answers from that collection with citations."""
    cid, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())
    # NOTE: an agent model's LLM calls take slots one by one (api/charging.py): holding one for the
    # whole run as well would leave its calls waiting on it.
    slots = None if body.model.startswith(AGENT_PREFIX) else state.answer_slots
    admit_early(state, slots, "chat", tenant)
    held = await asyncio.to_thread(admit_reserving, request, principal, state, *_worst_case(state, body))
    meter = held.meter
    events = charging(admitted(_events(state, tenant, body, meter), slots, str(tenant)), held)
    events = observed_route(events, state, "chat", tenant)
    first = await anext(events)  # 4xx errors surface before any byte is sent
    if body.stream:

        async def stream() -> AsyncIterator[ServerSentEvent]:
            yield _chunk(cid, created, body.model, {"role": "assistant", "content": ""})
            async for event in _prepend(first, events):
                if event["type"] == "token":
                    yield _chunk(cid, created, body.model, {"content": event["text"]})
                elif event["type"] == "done":
                    extra = {"usage": _usage(event["usage"]), **_rag_fields(event)}
                    yield _chunk(cid, created, body.model, {}, event["finish_reason"], **extra)
            yield sse(None, "[DONE]")

        return event_source(stream())
    text, done = await unless_disconnected(request, _collect(first, events))
    message = AssistantMessage(content=done.get("answer", "".join(text)))
    return PlatformChatCompletion(
        id=cid,
        created=created,
        model=body.model,
        choices=[ChatChoice(message=message, finish_reason=done.get("finish_reason") or "stop")],
        usage=_usage(done.get("usage", {})),
        **_rag_fields(done),
    )


RAG_FIELDS = ("citations", "answer_mode_used", "quote_method", "fallback", "claims", "escalations")


def _rag_fields(done: dict) -> dict:
    """The grounded-answer extras of a rag/ or agent/ model's final event (none for plain models);
    the event's `model` is `answered_by` (the response's `model` is the one requested)."""
    fields = {key: done[key] for key in RAG_FIELDS if key in done}
    if "escalations" in done:
        fields["answered_by"] = done.get("model")
    return fields


async def _collect(first: dict, events: AsyncIterator[dict]) -> tuple[list[str], dict]:
    """A non-streamed answer: its text pieces and its `done` event."""
    text, done = [], {}
    try:
        async for event in _prepend(first, events):
            if event["type"] == "token":
                text.append(event["text"])
            elif event["type"] == "done":
                done = event
    finally:
        await events.aclose()  # cancelled (client gone): the engine request is aborted now
    return text, done


async def _prepend(first: dict, rest: AsyncIterator[dict]) -> AsyncIterator[dict]:
    yield first
    async for event in rest:
        yield event
