"""Settings of question answering (see agents/qa/README.md)."""

from typing import Literal

from pydantic import BaseModel, Field, field_validator, model_validator


class CascadeModel(BaseModel):
    """One model of the answer cascade; a plain string is `{"model": string}`."""

    model: str = Field(
        description="A model spec (packaged name, local path, hub id) run by our engine, or with `url` "
        "the name that server serves; answers report it as their `model`."
    )
    url: str | None = Field(
        default=None, description="An OpenAI-compatible server for this model (vLLM, SGLang, engine serve)."
    )
    max_tokens: int | None = Field(
        default=None,
        ge=1,
        description="Ceiling on this model's generated tokens per call (written answers and agent turns; "
        "quotes always get enough for whole sentences): keeps the cheap tries cheap.",
    )

    @model_validator(mode="before")
    @classmethod
    def _from_name(cls, value: object) -> object:
        return {"model": value} if isinstance(value, str) else value


class QASettings(BaseModel):
    top_k: int = Field(default=16, description="Chunks retrieved per question.")
    sources_token_budget: int = Field(
        default=2400,
        description="Most generator tokens that the sources may take in the prompt (measured on long "
        "documents: at 1200 the budget, not the ranking, dropped the answer for 4 questions in 10).",
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
    max_concurrent_answers: int | None = Field(
        default=None,
        ge=1,
        description="A fixed ceiling on the answers (ask, chat) generating at once per API process; more "
        "get 503 + Retry-After at once instead of waiting in the engine's queue. Unset: no ceiling.",
    )
    answer_latency_target: float | None = Field(
        default=2.0,
        gt=1.0,
        description="Adaptive admission (api/admission.py): answers admitted at once per API process adapt "
        "so that an answer takes at most this multiple of the recent median time of answers that ran "
        "alone; more get 503 + Retry-After. Unset: off (only max_concurrent_answers applies).",
    )
    answer_mode: Literal["quote", "generate", "auto"] = Field(
        default="auto",
        description="quote: answers are verbatim source sentences chosen under a grammar; generate: the "
        "model writes them (claim-checked); auto: quote for generators of at most quote_max_params.",
    )
    quote_max_params: int = Field(
        default=3_000_000_000,
        description="'auto' quotes with in-process generators this small or smaller (remote ones: generate).",
    )
    quote_candidates: int = Field(
        default=16, ge=1, le=64, description="Source sentences closest to the question offered to quote mode."
    )
    quote_max_sources: int = Field(
        default=1,
        ge=1,
        le=16,
        description="Quote mode quotes sentences of this many sources: those whose best sentence scores "
        "highest (one keeps citations on the answering chunk; raise it for questions spanning documents).",
    )
    quote_rank_weight: float = Field(
        default=0.05,
        ge=0,
        description="Quote mode: a sentence's score loses this per place its source stands below the "
        "best in retrieval.",
    )
    quote_max_sentences: int = Field(default=3, ge=1, le=8, description="Most sentences of a quoted answer.")
    quote_first_margin: float = Field(
        default=0.1,
        ge=0,
        description="Quote mode: the answer opens with a sentence the embedding model scores within this "
        "of the best candidate (the small generator picks openings poorly); later sentences are free.",
    )
    quote_fallback_margin: float = Field(
        default=0.05,
        description="Without grammar support: the best sentence and those this close to it in similarity.",
    )
    claim_check: bool = Field(default=True, description="Check each generated sentence against its sources.")
    claim_floor: float = Field(
        default=0.5,
        description="Claim check: a sentence with less of its content words in the evidence is unsupported.",
    )
    claim_copy: float = Field(
        default=0.85,
        description="Claim check: this share of a sentence's content words in the evidence: supported.",
    )
    cascade: list[CascadeModel] = Field(
        default_factory=list,
        description="Models that answer in turn, smallest first (agents/qa/README.md, 'Cascade'): the next "
        "one answers when our checks find the answer weak. Empty: the one generator answers (llm_model).",
    )
    cascade_max_unsupported: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="Cascade: the share of an answer's sentences the claim check may find unsupported; more "
        "and the next model answers (0: any unsupported sentence escalates).",
    )
    cascade_min_quote_score: float = Field(
        default=0.35,
        description="Cascade: a quoted answer whose sentences score under this on average (their embedding "
        "similarity to the question, as quote mode ranks them) escalates.",
    )
    cascade_strong_sources: float = Field(
        default=0.5,
        description="Cascade: a written answer that says the documents do not hold the answer escalates "
        "when the best source's similarity is at least this (min_relevance already gates weak ones).",
    )

    @field_validator("cascade")
    @classmethod
    def _distinct(cls, models: list[CascadeModel]) -> list[CascadeModel]:
        names = [m.model for m in models]
        if len(set(names)) != len(names):
            raise ValueError(f"qa.cascade names a model twice: {names} (answers report which one answered)")
        return models
