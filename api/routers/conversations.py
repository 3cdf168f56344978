"""Conversations of /v1/ask: the tenant's list, newest first, and one with its turns (each answer
with its citations, mode and claim check), so that a client can show and continue past ones."""

from __future__ import annotations

import uuid
from datetime import datetime

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict
from sqlalchemy import func, select

from agents.qa.store import get_conversation
from api.deps import ReadingTenant, SessionDep
from core.errors import ClientError
from core.models import Conversation, Message

router = APIRouter(prefix="/v1/conversations", tags=["ask"])


class ConversationOut(BaseModel):
    id: uuid.UUID
    title: str
    collection_ids: list[str]
    messages: int
    created_at: datetime
    updated_at: datetime


class MessageOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    role: str
    content: str
    query: str | None
    citations: list
    usage: dict
    timings: dict
    answer_mode: str | None
    claims: list | None
    created_at: datetime


class ConversationDetail(ConversationOut):
    turns: list[MessageOut]


@router.get("", response_model=list[ConversationOut])
def list_conversations(session: SessionDep, tenant: ReadingTenant, limit: int = Query(50, ge=1, le=200)):
    counts = (
        select(Message.conversation_id, func.count().label("n"), func.max(Message.created_at).label("last"))
        .group_by(Message.conversation_id)
        .subquery()
    )
    rows = session.execute(
        select(Conversation, func.coalesce(counts.c.n, 0))
        .outerjoin(counts, counts.c.conversation_id == Conversation.id)
        .where(Conversation.tenant_id == tenant)
        # NOTE: a turn adds messages, not a change to the conversation's row: its last message dates it.
        .order_by(func.coalesce(counts.c.last, Conversation.created_at).desc())
        .limit(limit)
    ).all()
    return [_out(c, n) for c, n in rows]


@router.get("/{conversation_id}", response_model=ConversationDetail)
def read_conversation(conversation_id: uuid.UUID, session: SessionDep, tenant: ReadingTenant):
    conversation = get_conversation(session, tenant, conversation_id)
    if conversation is None:
        raise ClientError(404, "conversation_not_found", f"no conversation {conversation_id}")
    turns = [MessageOut.model_validate(m) for m in conversation.messages]
    return ConversationDetail(**_out(conversation, len(turns)).model_dump(), turns=turns)


def _out(c: Conversation, messages: int) -> ConversationOut:
    return ConversationOut(
        id=c.id,
        title=c.title,
        collection_ids=c.collection_ids,
        messages=messages,
        created_at=c.created_at,
        updated_at=c.updated_at,
    )
