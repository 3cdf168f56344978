"""Feedback on answers, and negative feedback turned into an answer-eval dataset (JSONL, the
format of evals/datasets.py), so that production failures become regression tests."""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from core.models import Conversation, Message, MessageFeedback


def find_answer_message(session: Session, tenant: uuid.UUID, message_id: uuid.UUID) -> Message | None:
    """An assistant message in one of the tenant's conversations."""
    return session.scalar(
        select(Message)
        .join(Conversation, Conversation.id == Message.conversation_id)
        .where(Message.id == message_id, Message.role == "assistant", Conversation.tenant_id == tenant)
    )


def _question(session: Session, message: Message) -> str:
    """The user turn the answer replied to (the stand-alone query when there is none)."""
    asked = session.scalar(
        select(Message.content)
        .where(
            Message.conversation_id == message.conversation_id,
            Message.role == "user",
            Message.created_at <= message.created_at,
        )
        .order_by(Message.created_at.desc())
        .limit(1)
    )
    return asked or message.query or ""


def feedback_dataset(
    session: Session, tenant: uuid.UUID, folder: Path, rating: str = "down", since: datetime | None = None
) -> dict:
    """Write items.jsonl into `folder` from the tenant's feedback of `rating`: the question, the
    corrected answer as the reference, and the cited documents of the rejected answer as context
    (`rejected_answer`, `rejected_citations`). Feedback without a corrected answer has no reference
    to score against and is counted as skipped."""
    query = (
        select(MessageFeedback, Message)
        .join(Message, Message.id == MessageFeedback.message_id)
        .where(MessageFeedback.tenant_id == tenant, MessageFeedback.rating == rating)
        .order_by(MessageFeedback.created_at)
    )
    if since is not None:
        query = query.where(MessageFeedback.created_at >= since)
    items, skipped = [], 0
    for feedback, message in session.execute(query).all():
        if not (feedback.corrected_answer or "").strip():
            skipped += 1
            continue
        items.append(
            {
                "id": str(feedback.id),
                "question": _question(session, message),
                "answer": feedback.corrected_answer,
                "rejected_answer": message.content,
                "rejected_citations": [c.get("source_id") for c in message.citations or []],
                "comment": feedback.comment,
            }
        )
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "items.jsonl").write_text("".join(json.dumps(item) + "\n" for item in items), encoding="utf-8")
    return {"items": len(items), "skipped_without_correction": skipped}
