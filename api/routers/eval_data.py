"""Evaluation datasets (upload, or built from negative feedback) and feedback on answers."""

from __future__ import annotations

import re
import shutil
import uuid
from datetime import datetime
from typing import Literal

from fastapi import APIRouter, File, Response, UploadFile
from pydantic import BaseModel, Field

from api.deps import CurrentTenant, SessionDep, SettingsDep
from api.schemas.evals import DatasetOut, FeedbackDatasetOut, FeedbackOut
from core.errors import ClientError
from core.models import MessageFeedback
from core.quotas import QuotaExceeded, check_quota, lock_usage, tenant_datasets_dir
from core.settings import Settings
from evals.datasets import datasets_root
from evals.feedback import feedback_dataset, find_answer_message

router = APIRouter(prefix="/v1", tags=["evals"])

MAX_DATASET_BYTES = 512 * 1024 * 1024
_SAFE_PART = re.compile(r"^[A-Za-z0-9._-]+$")


class FeedbackIn(BaseModel):
    rating: Literal["up", "down"]
    comment: str = Field(default="", max_length=10_000)
    corrected_answer: str | None = Field(default=None, max_length=50_000)


class FromFeedback(BaseModel):
    rating: Literal["up", "down"] = "down"
    since: datetime | None = None


def _relative(name: str) -> str:
    """An upload's file name as a safe relative path (e.g. 'qrels/test.tsv'); 422 otherwise."""
    parts = name.replace("\\", "/").split("/")
    if not all(_SAFE_PART.match(p) and p not in (".", "..") for p in parts):
        raise ClientError(
            422, "invalid_dataset", f"file name {name!r}: use letters, digits, . _ - and / only"
        )
    return "/".join(parts)


def _keep_within_quota(session, settings: Settings, tenant, folder) -> None:
    """Count the written dataset in the tenant's storage quota; over it, the dataset is removed.

    NOTE: checked after writing, under the tenant's quota lock: the files on disk are the usage, so
    two concurrent uploads can at worst both be refused, never both pass."""
    try:
        lock_usage(session, tenant)
        check_quota(session, tenant, settings.limits, settings.data_dir)
    except QuotaExceeded:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    finally:
        session.commit()  # ends the transaction, releasing the lock


@router.post("/evals/datasets", status_code=201, response_model=DatasetOut)
def upload_dataset(
    session: SessionDep, settings: SettingsDep, tenant: CurrentTenant, files: list[UploadFile] = File(...)
):
    """Store dataset files (names may hold folders: 'qrels/test.tsv'); returns the path to evaluate.
    Their bytes count in the tenant's storage quota until DELETE /v1/evals/datasets/{id}."""
    dataset_id = uuid.uuid4().hex
    relative = f"uploads/{tenant}/{dataset_id}"
    folder = datasets_root(settings.data_dir) / relative
    names = [_relative(f.filename or "") for f in files]
    check_quota(
        session, tenant, settings.limits, settings.data_dir, add_bytes=sum(f.size or 0 for f in files)
    )
    total = 0
    try:
        for upload, name in zip(files, names, strict=True):
            target = folder / name
            target.parent.mkdir(parents=True, exist_ok=True)
            with target.open("wb") as out:
                while chunk := upload.file.read(1 << 20):
                    total += len(chunk)
                    if total > MAX_DATASET_BYTES:
                        raise ClientError(
                            413, "dataset_too_large", f"datasets are limited to {MAX_DATASET_BYTES} bytes"
                        )
                    out.write(chunk)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    _keep_within_quota(session, settings, tenant, folder)
    return {"id": dataset_id, "path": relative, "files": names, "bytes": total}


@router.post("/evals/datasets/from-feedback", status_code=201, response_model=FeedbackDatasetOut)
def dataset_from_feedback(
    body: FromFeedback, session: SessionDep, settings: SettingsDep, tenant: CurrentTenant
):
    """An answer-eval dataset (items.jsonl) from the tenant's feedback, negative by default."""
    dataset_id = f"feedback-{uuid.uuid4().hex[:12]}"
    relative = f"uploads/{tenant}/{dataset_id}"
    folder = datasets_root(settings.data_dir) / relative
    counts = feedback_dataset(session, tenant, folder, body.rating, body.since)
    _keep_within_quota(session, settings, tenant, folder)
    return {"id": dataset_id, "path": relative, "format": "jsonl", **counts}


@router.delete("/evals/datasets/{dataset_id}", status_code=204, response_class=Response)
def delete_dataset(dataset_id: str, settings: SettingsDep, tenant: CurrentTenant):
    """Delete an uploaded dataset (its id, or the last part of its path); runs made from it stay."""
    folder = tenant_datasets_dir(settings.data_dir, tenant) / dataset_id
    if not _SAFE_PART.match(dataset_id) or dataset_id in (".", "..") or not folder.is_dir():
        raise ClientError(404, "dataset_not_found", f"no uploaded dataset {dataset_id!r}")
    shutil.rmtree(folder)
    return Response(status_code=204)


@router.post("/messages/{message_id}/feedback", status_code=201, response_model=FeedbackOut)
def post_feedback(message_id: uuid.UUID, body: FeedbackIn, session: SessionDep, tenant: CurrentTenant):
    """Up or down on an answer, with an optional comment and corrected answer."""
    message = find_answer_message(session, tenant, message_id)
    if message is None:
        raise ClientError(404, "message_not_found", f"no answer message {message_id}")
    row = MessageFeedback(tenant_id=tenant, message_id=message.id, **body.model_dump())
    row.comment = row.comment or ""
    session.add(row)
    session.commit()
    return {"id": str(row.id), "message_id": str(message.id), **body.model_dump()}
