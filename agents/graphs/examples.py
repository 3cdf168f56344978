"""Worked examples shown before the task: a 135M model copies a demonstrated layout far better than
it follows instructions (it otherwise fills strings with dates or file names). Each is a list of
chat turns in the exact form the grammar produces, on a made-up topic so no answer leaks."""

from __future__ import annotations

import json

from agents.qa.sentences import sentence_spans
from agents.tools import FINAL_ANSWER
from inference.grammar.tools import TOOL_CALL_END, TOOL_CALL_START

QUESTION = "Who wrote the Foo report?"
OBSERVATION = "[1] foo-report.txt: <doc>The Foo report was written by Ada Lane in 2019.</doc>"
ANSWER = {"answer": "Ada Lane wrote the Foo report [1].", "sources": [1]}


def call(name: str, arguments: dict) -> dict:
    return calls((name, arguments))


def calls(*named: tuple[str, dict]) -> dict:
    """One assistant turn holding these (name, arguments) calls, one `<tool_call>` block each."""
    bodies = [json.dumps({"name": name, "arguments": arguments}) for name, arguments in named]
    blocks = [f"{TOOL_CALL_START}\n{body}\n{TOOL_CALL_END}" for body in bodies]
    return {"role": "assistant", "content": "\n".join(blocks)}


def observed(observations: list[str]) -> dict:
    """The user turn feeding a ReAct turn's observations back, one line each, in call order."""
    seen = "\n".join(f"Observation: {o}" for o in observations)
    return {"role": "user", "content": f"{seen}\nIf this answers the task, call final_answer."}


# Two things, one search each (ReAct: two calls in one turn; ReWOO: a two-step plan). Shown only
# one-fact tasks, the ReWOO planners searched the whole task once and found half of what was asked.
PAIR = "When did the Bar festival start, and where does the Baz river flow?"
PAIR_EVIDENCE = [
    (
        "search",
        "Bar festival",
        "[1] bar-festival.txt: <doc>The Bar festival started in 1988 in Linden.</doc>\n"
        "[2] linden.txt: <doc>Linden is a town</doc>",
    ),
    (
        "search",
        "Baz river",
        "[4] baz-river.txt: <doc>The Baz river flows north into Lake Qux.</doc>\n"
        "[5] qux.txt: <doc>Lake Qux is</doc>",
    ),
]
PAIR_ANSWER = {
    "answer": "The Bar festival started in 1988 [1]; the Baz river flows into Lake Qux [4].",
    "sources": [1, 4],
}

# ReAct shows one fact found with one call, then two things found with two calls in one turn: the
# small models copy the layout they are shown, and a layout of one call a turn gives one call a turn.
REACT = [
    {"role": "user", "content": QUESTION},
    call("search", {"query": QUESTION}),
    observed([OBSERVATION]),
    call(FINAL_ANSWER, ANSWER),
    {"role": "user", "content": PAIR},
    calls(*(("search", {"query": query}) for _, query, _ in PAIR_EVIDENCE)),
    observed([seen for _, _, seen in PAIR_EVIDENCE]),
    call(FINAL_ANSWER, PAIR_ANSWER),
]

REWOO_INPUTS = ["Foo report author", *(query for _, query, _ in PAIR_EVIDENCE)]
REWOO_PLANNER = [
    {"role": "user", "content": QUESTION},
    call("plan", {"steps": [{"tool": "search", "input": REWOO_INPUTS[0]}]}),
    {"role": "user", "content": PAIR},
    call("plan", {"steps": [{"tool": tool, "input": query} for tool, query, _ in PAIR_EVIDENCE]}),
]


_REWOO_INPUTS_LOWER = frozenset(i.lower() for i in REWOO_INPUTS)


# The examples' made-up names: a sentence of a final answer naming one that its task does not name
# is the example's answer, copied (SmolLM2 answered an MCP time question with "The Bar festival
# started in 1988 [1]; ... the current time is ...", and in its forced answer turn wrote the
# example's sentences before the time it had read).
NAMES = ("Foo report", "Ada Lane", "Bar festival", "Baz river", "Lake Qux", "Linden")


def without_copied(answer: str, task: str) -> str:
    """`answer` without its sentences, or clauses between semicolons, that name a worked example's
    made-up topic `task` does not (the example's answer is one sentence of two such clauses)."""
    copied = [n.lower() for n in NAMES if n.lower() not in task.lower()]
    kept = []
    for start, end in sentence_spans(answer):
        clauses = [c.strip() for c in answer[start:end].split(";")]
        own = [c for c in clauses if c and not any(name in c.lower() for name in copied)]
        if own:
            kept.append("; ".join(own))
    return " ".join(kept)


def copied(step_input: str, task: str) -> bool:
    """Whether a planned input is a worked example's, which the task does not mention."""
    text = step_input.strip().lower()
    return text in _REWOO_INPUTS_LOWER and text not in task.lower()


def evidence(task: str, steps: list[tuple[str, str, str]]) -> str:
    """The ReWOO solver's prompt: the task, then each (tool, input, observation) as `#E<n> tool[input]:`."""
    listed = "\n".join(f"#E{i} {tool}[{arg}]: {seen}" for i, (tool, arg, seen) in enumerate(steps, 1))
    listed = listed or "(none: no tools were available)"
    return f"Task: {task}\n\nEvidence:\n{listed}"


REWOO_SOLVER = [
    {"role": "user", "content": evidence(PAIR, PAIR_EVIDENCE)},
    call(FINAL_ANSWER, PAIR_ANSWER),
]

# Two things, two steps, as ReWOO's planner is shown.
PLANNER = [
    {"role": "user", "content": QUESTION},
    call("plan", {"steps": [QUESTION]}),
    {"role": "user", "content": PAIR},
    call("plan", {"steps": ["When did the Bar festival start?", "Where does the Baz river flow?"]}),
]

# A step left is planned again; none left is answered. Shown only the second, the models answered
# after the first of two steps (agents/README.md, Call layouts).
REPLANNER = [
    {
        "role": "user",
        "content": f"Task: {PAIR}\n\nDone:\n- When did the Bar festival start?: It started in 1988 [1].\n\n"
        "Steps left:\n- Where does the Baz river flow?\n\nSources:\n[1] bar-festival.txt",
    },
    call("replan", {"steps": ["Where does the Baz river flow?"]}),
    {
        "role": "user",
        "content": f"Task: {QUESTION}\n\nDone:\n- {QUESTION}: {ANSWER['answer']}\n\nSteps left:\n(none)\n\n"
        "Sources:\n[1] foo-report.txt",
    },
    call(FINAL_ANSWER, ANSWER),
]
