"""Worked examples shown before the task: a 135M model copies a demonstrated layout far better than
it follows instructions (it otherwise fills strings with dates or file names). Each is a list of
chat turns in the exact form the grammar produces, on a made-up topic so no answer leaks."""

from __future__ import annotations

import json

from agents.tools import FINAL_ANSWER
from inference.grammar.tools import TOOL_CALL_END, TOOL_CALL_START

QUESTION = "Who wrote the Foo report?"
OBSERVATION = "[1] foo-report.txt: The Foo report was written by Ada Lane in 2019."
ANSWER = {"answer": "Ada Lane wrote the Foo report [1].", "sources": [1]}


def call(name: str, arguments: dict) -> dict:
    body = json.dumps({"name": name, "arguments": arguments})
    return {"role": "assistant", "content": f"{TOOL_CALL_START}\n{body}\n{TOOL_CALL_END}"}


REACT = [
    {"role": "user", "content": QUESTION},
    call("search", {"query": QUESTION}),
    {"role": "user", "content": f"Observation: {OBSERVATION}\nIf this answers the task, call final_answer."},
    call(FINAL_ANSWER, ANSWER),
]

REWOO_PLANNER = [
    {"role": "user", "content": QUESTION},
    call("plan", {"steps": [{"tool": "search", "input": QUESTION}]}),
]

REWOO_SOLVER = [
    {"role": "user", "content": f"Task: {QUESTION}\n\nEvidence:\n#E1 search[{QUESTION}]: {OBSERVATION}"},
    call(FINAL_ANSWER, ANSWER),
]

PLANNER = [
    {"role": "user", "content": QUESTION},
    call("plan", {"steps": [QUESTION]}),
]

REPLANNER = [
    {
        "role": "user",
        "content": f"Task: {QUESTION}\n\nDone:\n- {QUESTION}: {ANSWER['answer']}\n\nSteps left:\n(none)\n\n"
        "Sources:\n[1] foo-report.txt",
    },
    call(FINAL_ANSWER, ANSWER),
]
