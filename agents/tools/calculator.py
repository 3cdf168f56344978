"""Safe arithmetic: the expression is parsed with `ast` and only numbers and operators are walked."""

from __future__ import annotations

import ast
import math
import operator
from typing import Annotated

from pydantic import Field

from agents.tools.base import ToolContext, ToolResult

_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_FUNCTIONS = {"sqrt": math.sqrt, "abs": abs, "round": round, "min": min, "max": max, "log": math.log}
_MAX_EXPONENT = 1000  # 9**9**9 would take the process down


def evaluate(expression: str) -> float | int:
    """The value of an arithmetic expression; ValueError for anything else."""
    try:
        tree = ast.parse(expression.replace("^", "**"), mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"not an arithmetic expression: {exc.msg}") from exc
    return _eval(tree.body)


def _eval(node: ast.AST) -> float | int:
    if (
        isinstance(node, ast.Constant)
        and isinstance(node.value, int | float)
        and not isinstance(node.value, bool)
    ):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > _MAX_EXPONENT:
            raise ValueError("exponent too large")
        return _BINARY[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand))
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _FUNCTIONS
        and not node.keywords
    ):
        return _FUNCTIONS[node.func.id](*[_eval(arg) for arg in node.args])
    raise ValueError(f"unsupported expression element: {ast.dump(node)[:60]}")


async def calculator(
    ctx: ToolContext,
    expression: Annotated[str, Field(max_length=120, description="Arithmetic, e.g. (3 + 4) * 2")],
) -> ToolResult:
    """Evaluate an arithmetic expression (+ - * / // % **, sqrt, abs, round, min, max, log)."""
    try:
        value = evaluate(expression)
    except (ArithmeticError, TypeError) as exc:
        raise ValueError(f"cannot evaluate {expression!r}: {exc}") from exc
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return ToolResult(f"{expression} = {value}", {"value": value})
