"""Token charging for every entry point that generates (ask, chat, agent runs, the MCP server).

A generation first *reserves* its worst case on the caller's key and tenant counters: the prompt's
estimate plus `max_tokens` (429 when they lack room), then *settles* on what it actually used:
the difference is charged, or given back. A request cut short (client gone, cancelled, failed)
settles on the tokens it had streamed: partial usage is charged, never nothing.

Entry points use:
- `admit_reserving(request, principal, state, prompt, max_tokens)` -> `Reservation` (a route's
  admission and reservation at once), or `reserve(meter, prompt, max_tokens)` for a request already
  admitted; then `reservation.settle(usage)`;
- `charging(events, reservation)` around an event stream (the `done` event's usage settles it);
- `AgentTokenGate(meter)`: what an agent run's chat model calls around each LLM call.
`api.ratelimit.admit(state, principal)` gives the `Meter` outside FastAPI routes.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator
from dataclasses import dataclass

from fastapi import Request

from agents.chat_model import TokenLimitReached
from api.admission import AnswerSlots
from api.deps import Principal
from api.ratelimit import Meter, limit_request, token_costs
from api.state import AppState
from core.errors import ClientError
from core.settings.qa import QASettings

# NOTE: a deliberate over-estimate (English runs ~4 characters a token, JSON and code ~3): settling
# gives back what was not used, while an estimate below the real count lets a burst pass the limit.
CHARS_PER_TOKEN = 3


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN) + 8  # + the chat template's few tokens


@dataclass(eq=False)
class Reservation:
    """Tokens held for one generation until `settle`."""

    meter: Meter
    prompt: int
    completion: int
    settled: bool = False

    def settle(self, usage: dict) -> None:
        """Charge the actual usage: the difference with the reservation is added or given back.
        Only the first call counts."""
        if self.settled:
            return
        self.settled = True
        limiter = self.meter.limiter
        if limiter is None:
            return
        used = token_costs(int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0)))
        held = token_costs(self.prompt, self.completion)
        more = {k: used[k] - held[k] for k in used if used[k] > held[k]}
        less = {k: held[k] - used[k] for k in used if used[k] < held[k]}
        if more:
            limiter.charge(self.meter.scopes, more)
        if less:
            limiter.give_back(self.meter.scopes, less)

    def settle_partial(self, completion_seen: int) -> None:
        """The generation ended early. With tokens made, the prompt was read and those were made;
        with none, it is taken as not started (a refusal, a bad request): all is given back."""
        if completion_seen <= 0:
            self.settle({})
        else:
            self.settle(
                {"prompt_tokens": self.prompt, "completion_tokens": min(completion_seen, self.completion)}
            )


def answer_worst_case(qa: QASettings, prompt_text: str, max_tokens: int | None) -> tuple[int, int]:
    """A grounded answer's prompt and completion tokens to reserve: the question's estimate with a
    full sources budget, and its `max_tokens`."""
    return estimate_tokens(prompt_text) + qa.sources_token_budget, max_tokens or qa.max_tokens


def admit_reserving(
    request: Request, principal: Principal, state: AppState, prompt: int, max_tokens: int
) -> Reservation:
    """A generating route's admission with its reservation, in one transaction of the counters:
    under a flood every round trip and thread hop is a wait for the interpreter another tenant's
    ask needs too."""
    meter = limit_request(request, principal, state, token_costs(prompt, max_tokens))
    return Reservation(meter, prompt, max_tokens)


def reserve(meter: Meter, prompt: int, max_tokens: int) -> Reservation:
    """Hold `prompt` + `max_tokens` tokens on the meter's scopes; ClientError 429 when they do not fit."""
    if meter.limiter is not None:
        meter.limiter.reserve(meter.scopes, token_costs(prompt, max_tokens))
    return Reservation(meter, prompt, max_tokens)


async def charging(events: AsyncIterator[dict], reservation: Reservation) -> AsyncIterator[dict]:
    """Pass pipeline events through; the `done` event's usage settles the reservation, and a stream
    that ends without one (client gone, error) settles on the tokens streamed so far. Events marked
    `charged` were charged where they were made (agent runs charge each LLM call)."""
    streamed = 0
    try:
        async for event in events:
            if event["type"] == "token":
                streamed += 1
            elif event["type"] == "done" and not event.get("charged"):
                await asyncio.to_thread(reservation.settle, event.get("usage") or {})
            elif event["type"] == "done":
                await asyncio.to_thread(reservation.settle, {})
            yield event
    except (GeneratorExit, asyncio.CancelledError):
        # NOTE: no await here: a closing or cancelled generator cannot wait, so its few storage
        # calls block the event loop; every other ending settles off it.
        if not reservation.settled:
            reservation.settle_partial(streamed)
        raise
    except BaseException:
        # A failed or refused generation (admission's 503 among them: one per request of a
        # flooding tenant) gives its tokens back in a thread, not on the loop others wait on.
        if not reservation.settled:
            await asyncio.to_thread(reservation.settle_partial, streamed)
        raise
    if not reservation.settled:
        await asyncio.to_thread(reservation.settle_partial, streamed)


@dataclass(eq=False)
class _AgentCall:
    """One admitted LLM call of an agent run: its tokens and its answer slot."""

    reservation: Reservation
    slots: AnswerSlots | None
    ticket: object

    def _release(self) -> None:
        if self.slots is not None and self.ticket is not None:
            self.slots.release(self.ticket, generated=False)  # an agent call says nothing of answers' cost
            self.ticket = None

    async def settle(self, usage: dict) -> None:
        self._release()
        await asyncio.to_thread(self.reservation.settle, usage)

    def abandon(self) -> None:
        """Cancelled or failed mid-call: the prompt was read, nothing is known of the rest."""
        self._release()
        self.reservation.settle({"prompt_tokens": self.reservation.prompt})


class AgentTokenGate:
    """Admits each LLM call of an agent run like an answer: its tokens reserved on the caller's
    meter and settled after it (background, streamed and waited-for runs are charged alike, as
    they go), and an answer slot of the run's tenant held while it generates."""

    def __init__(self, meter: Meter, slots: AnswerSlots | None = None, tenant: str = "") -> None:
        self.meter, self.slots, self.tenant = meter, slots, tenant

    async def reserve(self, prompt_text: str, max_tokens: int) -> _AgentCall:
        try:
            held = await asyncio.to_thread(reserve, self.meter, estimate_tokens(prompt_text), max_tokens)
        except ClientError as exc:
            raise TokenLimitReached(exc.message) from None
        try:
            ticket = await self.slots.wait(self.tenant) if self.slots is not None else None
        except BaseException:
            held.settle({})
            raise
        return _AgentCall(held, self.slots, ticket)
