"""Conversations in Postgres: history for follow-ups, and each answer with its citations."""

from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlalchemy.orm import Session

from core.models import Conversation, Message


def get_conversation(
    session: Session, tenant_id: uuid.UUID, conversation_id: uuid.UUID
) -> Conversation | None:
    """The tenant's conversation, or None (another tenant's conversation is not found)."""
    return session.scalar(
        select(Conversation).where(Conversation.id == conversation_id, Conversation.tenant_id == tenant_id)
    )


def history(session: Session, conversation: Conversation) -> list[dict]:
    rows = session.scalars(
        select(Message).where(Message.conversation_id == conversation.id).order_by(Message.created_at)
    ).all()
    return [{"role": m.role, "content": m.content} for m in rows]


def record_turn(
    session: Session,
    tenant_id: uuid.UUID,
    conversation: Conversation | None,
    collection_ids: list[uuid.UUID],
    question: str,
    done: dict,
    query: str,
) -> tuple[Conversation, Message]:
    """Store the question and the answer (citations, usage, timings); creates the conversation."""
    if conversation is None:
        conversation = Conversation(
            tenant_id=tenant_id, collection_ids=[str(c) for c in collection_ids], title=question[:200]
        )
        session.add(conversation)
        session.flush()
    session.add(Message(conversation_id=conversation.id, role="user", content=question))
    answer = Message(
        conversation_id=conversation.id,
        role="assistant",
        content=done["answer"],
        query=query,
        citations=done["citations"],
        usage=done["usage"],
        timings=done["timings"],
        answer_mode=done.get("answer_mode_used"),
        claims=done.get("claims"),
    )
    session.add(answer)
    session.flush()
    return conversation, answer
