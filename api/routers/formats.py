"""GET /v1/ingestion/formats: the file types uploads are parsed from, so that a client (the UI's
upload page) refuses other files before sending them instead of queueing what must fail."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel

from api.deps import ReadingTenant
from ingestion.parsers.formats import formats

router = APIRouter(prefix="/v1/ingestion", tags=["documents"])


class FormatOut(BaseModel):
    kind: str
    mime_type: str
    extensions: list[str]


class FormatsOut(BaseModel):
    formats: list[FormatOut]
    no_extension: bool = True  # a file without an extension is sniffed (text, or refused as binary)


@router.get("/formats", response_model=FormatsOut)
def read_formats(_: ReadingTenant):
    return FormatsOut(formats=[FormatOut(**f) for f in formats()])
