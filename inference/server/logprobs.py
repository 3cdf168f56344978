"""Engine logprobs (token ids) rendered in the two shapes OpenAI uses (chat and legacy completions)."""

from __future__ import annotations

from inference.protocol import EngineClient, TokenLogprob
from inference.server.schemas.chat import ChatLogprobs, TokenLogprobEntry, TopLogprob
from inference.server.schemas.completions import CompletionLogprobs


def _top(engine: EngineClient, token_id: int, logprob: float) -> TopLogprob:
    token = engine.decode([token_id])
    return TopLogprob(token=token, logprob=logprob, bytes=list(token.encode("utf-8")))


def chat_logprobs(engine: EngineClient, entries: list[TokenLogprob]) -> ChatLogprobs:
    content = []
    for entry in entries:
        chosen = _top(engine, entry.token_id, entry.logprob)
        top = [_top(engine, token_id, logprob) for token_id, logprob in entry.top.items()]
        content.append(TokenLogprobEntry(**chosen.model_dump(), top_logprobs=top))
    return ChatLogprobs(content=content)


def completion_logprobs(engine: EngineClient, entries: list[TokenLogprob], offset: int) -> CompletionLogprobs:
    """`offset` is where the first of `entries` starts in the completion text (streams continue it)."""
    tokens, offsets = [], []
    for entry in entries:
        offsets.append(offset)
        tokens.append(engine.decode([entry.token_id]))
        offset += len(tokens[-1])
    return CompletionLogprobs(
        tokens=tokens,
        token_logprobs=[entry.logprob for entry in entries],
        top_logprobs=[{engine.decode([t]): lp for t, lp in entry.top.items()} for entry in entries],
        text_offset=offsets,
    )
