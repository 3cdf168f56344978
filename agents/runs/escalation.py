"""The model cascade over whole agent runs (qa.cascade; agents/qa/README.md, "Cascade").

A turn with a missing or invalid call is made again by the next model (agents/chat_model.py). A
run whose graph ends without an answer (`NO_ANSWER`), or whose answer fails the claim check
(agents/runs/grounding.py: `unsupported_claims`, unless the last model wrote it), is run again from
the start by the next model alone: the trace keeps the first try and an `escalation` step, and the
run's usage sums the tries. Each try has the run's step and token budgets; the wall-clock budget
covers them all. A run the runner stopped (wall clock, token limit, cancel, a crash) is not run
again.
"""

from __future__ import annotations

import time

NO_ANSWER = ("budget_exhausted", "plan_done", "error")


def level(trace: list[dict]) -> int:
    """How many models the run has left behind: the cascade's index of the model it runs on now."""
    return sum(1 for step in trace if step.get("type") == "escalation")


def escalation_step(model: str, values: dict, reason: str) -> dict:
    """The trace step of a try the next model runs again (its usage, summed into the run's)."""
    return {
        "type": "escalation",
        "from": model,
        "reason": reason,
        "detail": values.get("detail"),
        "usage": values.get("usage") or {},
        "at": round(time.time(), 3),
    }


def run_usage(usage: dict | None, trace: list[dict]) -> dict:
    """The current try's usage plus every earlier try's (their `escalation` steps)."""
    total = dict(usage or {})
    for step in trace:
        if step.get("type") == "escalation":
            for key, value in step["usage"].items():
                total[key] = total.get(key, 0) + value
    return total


def answered_by(trace: list[dict]) -> dict:
    """`model`: the model of the run's last LLM turn (None before one); `escalations`: in order,
    each turn's (with its node) and each whole try's that ended without an answer."""
    turns = [step for step in trace if step.get("type") == "llm"]
    escalations = []
    for step in trace:
        if step.get("type") == "llm":
            escalations += [{**e, "node": step["node"]} for e in step.get("escalations") or []]
        elif step.get("type") == "escalation":
            escalations.append({"from": step["from"], "reason": step["reason"], "node": None})
    return {"model": turns[-1].get("model") if turns else None, "escalations": escalations}
