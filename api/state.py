"""What the API process holds for its lifetime: the platform (usecases/platform.py) and the API's
own services, every one a typed field built once by `api.main.build_state`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from usecases.platform import Platform

if TYPE_CHECKING:  # NOTE: the services import this module (they read the state): no import cycle
    from agents.runs.runner import AgentRunner
    from api.admission import AnswerSlots
    from api.early_refusal import KnownKeys
    from api.metrics import PlatformMetrics
    from api.metrics_history import MetricsSampler
    from api.ratelimit import RateLimiter


@dataclass
class AppState(Platform):
    # NOTE: set by `build_state` right after the platform's fields: they read the state itself.
    metrics: PlatformMetrics = field(init=False)
    rate_limiter: RateLimiter | None = field(init=False)  # None with limits off
    answer_slots: AnswerSlots | None = field(init=False)  # None without an answer limit
    agent_runner: AgentRunner = field(init=False)
    known_keys: KnownKeys = field(init=False)  # key -> tenant, for refusals before authentication
    sampler: MetricsSampler | None = None  # started by the app's lifespan (none without it)

    async def aclose(self) -> None:
        """Stop the API's services, then the platform's (at shutdown)."""
        await self.agent_runner.aclose()
        if self.rate_limiter is not None:
            self.rate_limiter.close()
        if self.sampler is not None:
            self.sampler.shutdown()
        self.metrics.gc_pauses.stop()
        await super().aclose()
