"""What routes get injected: the engine behind the server, its name and its metrics."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, Request

from inference.grammar.spec import ToolFormat
from inference.metrics import ServingMetrics
from inference.protocol import EngineClient, SamplingParams
from inference.server.errors import APIError
from inference.server.schemas.common import SamplingRequest


@dataclass
class ServerContext:
    engine: EngineClient
    model_name: str
    metrics: ServingMetrics
    # How chat requests with `tools` have the model write its calls (inference/grammar/spec.py).
    tool_call_format: ToolFormat = "json"
    # An "auto" turn answering a user goes without tools when the model's P(yes) that one fits is
    # under this (inference/tool_relevance.py); None: never asked.
    tool_relevance: float | None = None
    # Keys clients' cache salts (see `sampling_params`); random per server unless given.
    cache_salt_key: bytes = field(default_factory=lambda: secrets.token_bytes(32), repr=False)

    def check_model(self, name: str) -> None:
        if name != self.model_name:
            raise APIError(
                f"the model {name!r} does not exist; this server serves {self.model_name!r}",
                param="model",
                code="model_not_found",
            )

    def sampling_params(
        self,
        request: SamplingRequest,
        prompt_ids: list[int],
        max_tokens: int | None,
        logprobs: int | None,
        prompt_param: str,
    ) -> SamplingParams:
        """Check the prompt against the context window and build the engine's parameters."""
        if not prompt_ids:
            raise APIError("the prompt is empty", param=prompt_param)
        context = self.engine.max_model_len
        if len(prompt_ids) >= context:
            raise APIError(
                f"this model's maximum context length is {context} tokens, but the prompt has "
                f"{len(prompt_ids)} tokens",
                param=prompt_param,
                code="context_length_exceeded",
            )
        # Like OpenAI: an unset limit means "until the context is full", an explicit one must fit.
        if max_tokens is None:
            max_tokens = context - len(prompt_ids)
        elif len(prompt_ids) + max_tokens > context:
            raise APIError(
                f"this model's maximum context length is {context} tokens, but {len(prompt_ids)} prompt "
                f"tokens plus max_tokens={max_tokens} would need {len(prompt_ids) + max_tokens}",
                param="max_tokens",
                code="context_length_exceeded",
            )
        params = request.sampling_params(max_tokens, logprobs, self.tool_call_format)
        params.validate()
        if params.cache_salt is not None:
            # NOTE: a client's salt is keyed with the server's secret, so the engine only ever sees an
            # HMAC of it: a client cannot name another salt (a tenant id the platform uses in-process,
            # say) and read that tenant's cached prefixes, while equal salts still share.
            keyed = hmac.new(self.cache_salt_key, params.cache_salt.encode(), hashlib.sha256)
            params.cache_salt = keyed.hexdigest()
        return params


def get_context(request: Request) -> ServerContext:
    return request.app.state.context


ContextDep = Annotated[ServerContext, Depends(get_context)]
