"""Settings of the ingestion pipeline (see ingestion/README.md)."""

from typing import Literal

from pydantic import BaseModel, Field


class IngestionSettings(BaseModel):
    max_file_mb: float = Field(default=50.0, description="Uploads larger than this fail with a reason.")
    max_unpacked_mb: float = Field(
        default=100.0,
        description="A DOCX (ZIP) whose parts unpack to more than this fails as unpacked_too_large.",
    )
    max_parsed_chars: int = Field(
        default=20_000_000,
        ge=1,
        description="A document whose text passes this many characters fails as text_too_large, while an "
        "Office file is parsed (its parser holds the text, never the XML tree) and after any other parse; "
        "bounds the memory and time of chunking and embedding one document.",
    )
    ocr_max_pages: int = Field(
        default=200, description="Pages without a text layer read by OCR per PDF (0: no OCR)."
    )
    max_files_per_upload: int = Field(default=1000, description="Most files one upload request may carry.")
    chunk_strategy: Literal["fixed", "recursive", "semantic"] = Field(
        default="fixed", description="Chunker of new collections that do not choose one."
    )
    chunk_size_tokens: int = Field(
        default=256,
        description="Token budget per chunk of new collections (embedding model's tokenizer; capped at "
        "what the model reads).",
    )
    chunk_overlap_tokens: int = Field(
        default=32, description="Tokens shared by consecutive fixed-size windows (~12% of 256)."
    )
    index_dim: int | None = Field(
        default=128,
        description="Matryoshka prefix covered by the HNSW index of new collections (None: full dim).",
    )
    embed_batch_size: int = Field(default=32, description="Texts per forward pass of the embedding model.")
    docs_per_task: int = Field(
        default=8,
        description="Documents of a job per task message: their chunks are embedded in one pass (full "
        "batches); each document keeps its own claim, status and failure.",
    )
    task_bytes: int = Field(default=8_000_000, description="Bytes of uploads per task message, at most.")
    device: str = Field(default="cpu", description="torch device of the worker's embedding model.")
    worker_nice: int = Field(
        default=10,
        ge=0,
        le=19,
        description="Niceness added to worker processes: on a machine shared with the API, bulk "
        "ingestion yields the CPU to search and answers (0: same priority).",
    )
    torch_threads: int | None = Field(
        default=None, description="torch intra-op threads in a worker process (None: torch's default)."
    )
    max_retries: int = Field(default=5, description="Retries of a document after a transient error.")
    retry_backoff_max_s: int = Field(default=120, description="Cap of the exponential retry backoff.")
    heartbeat_interval_s: float = Field(
        default=10.0, description="How often a worker working on a document proves it is alive."
    )
    stale_after_s: float = Field(
        default=90.0,
        description="A claimed document with no heartbeat for this long belongs to a dead worker and is "
        "re-queued; queued work while every worker has been silent this long is re-sent.",
    )
    recovery_interval_s: float = Field(
        default=30.0, description="How often each worker looks for stuck jobs (0 disables the reaper)."
    )
    outbox_grace_s: float = Field(
        default=15.0, description="A job whose messages are not on the broker this long after commit is sent."
    )
    broker_rows_max_age_s: float = Field(
        default=3600.0,
        description="Delivered broker rows (kombu_message) and task results older than this "
        "are deleted by the reaper.",
    )
    task_soft_time_limit_s: float = Field(
        default=600.0,
        description="A task message still running after this fails its current document (parse_timeout).",
    )
    task_time_limit_s: float = Field(
        default=660.0, description="Hard limit: the worker process is killed; recovery requeues the rest."
    )
    max_attempts: int = Field(
        default=2,
        ge=1,
        description="Attempts of one document whose worker died before it fails for good with "
        "`worker_lost` (2: one retry; a file that kills its worker is never redelivered forever).",
    )
    embed_group: int = Field(
        default=128,
        ge=1,
        description="Texts embedded between two updates of the job's embedding progress (a cancel or "
        "delete is checked before every model batch, a few seconds of CPU at most).",
    )
