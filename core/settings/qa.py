"""Settings of question answering (see agents/qa/README.md)."""

from pydantic import BaseModel, Field


class QASettings(BaseModel):
    top_k: int = Field(default=8, description="Chunks retrieved per question.")
    sources_token_budget: int = Field(
        default=1200, description="Most generator tokens that the sources may take in the prompt."
    )
    min_relevance: float = Field(
        default=0.25,
        description="Best chunk's dense cosine similarity under which the answer is 'not in the documents'.",
    )
    refuse_without_sources: bool = Field(
        default=True,
        description="Answer 'not in the documents' instead of guessing when nothing is relevant.",
    )
    max_tokens: int = Field(default=256, description="Default answer length cap (tokens).")
    temperature: float = Field(default=0.0, description="Default sampling temperature of answers.")
    repetition_penalty: float = Field(
        default=1.0,
        description="Penalises tokens already in the prompt too: > 1 discourages quoting the sources.",
    )
    frequency_penalty: float = Field(
        default=0.3, description="Penalises tokens the answer has repeated: breaks small models' loops."
    )
    rewrite_follow_ups: bool = Field(
        default=True, description="Rewrite follow-up questions into stand-alone queries using the history."
    )
    history_turns: int = Field(default=6, description="Prior messages of a conversation put in the prompt.")
