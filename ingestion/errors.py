"""Error kinds of the pipeline: a permanent error fails one document with a readable reason; a
transient one is retried with backoff (the database or broker hiccuped, the document is fine).
"""


class PermanentError(Exception):
    """This document can never be ingested as it is (corrupt, unsupported, empty, too large).

    The tenant sees `reason`: a stable code and a short message, never raw exception text (which
    may name server paths or library internals; that goes to the worker's log).
    """

    def __init__(self, message: str, code: str = "unprocessable") -> None:
        super().__init__(message)
        self.code = code

    @property
    def reason(self) -> str:
        return f"{self.code}: {self}"


INTERNAL_ERROR = "internal_error: the document could not be processed (details in the worker's log)"


class TransientError(Exception):
    """Retry later: nothing is wrong with the document itself."""


def is_transient(exc: BaseException) -> bool:
    """Worth a retry: our own TransientError, or the database dropping or refusing the connection."""
    from sqlalchemy.exc import DBAPIError, OperationalError

    if isinstance(exc, TransientError | OperationalError):
        return True
    return isinstance(exc, DBAPIError) and exc.connection_invalidated


# Codes of the failure reasons that say nothing about the document itself (a service was down, a
# worker died, a time limit, a cancel, our own bug): requeueing may succeed. Every other reason is a
# PermanentError's: the same bytes fail the same way, so clients should not offer a retry.
RETRYABLE_CODES = frozenset({"retries_exhausted", "internal_error", "gave up", "parse_timeout", "cancelled"})


def is_retryable(reason: str | None) -> bool | None:
    """Whether a failed document's `reason` may go away on requeue; None when it did not fail."""
    if reason is None:
        return None
    return reason.split(":", 1)[0].strip() in RETRYABLE_CODES
