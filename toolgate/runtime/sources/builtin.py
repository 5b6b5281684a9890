"""Built-in tools (source ``builtin``): the current date and time, a calculator and an echo.

``calculate`` evaluates arithmetic by walking the expression's syntax tree: numbers, ``+ - * / // %
**``, unary signs, parentheses and the functions ``abs round min max sqrt``. Nothing else is
evaluated (no names, attributes or calls beyond those), and exponents and sizes are bounded so an
expression cannot exhaust the worker. A bad expression gives ``{"error": …}``, never an exception.
"""

from __future__ import annotations

import ast
import logging
import math
import operator
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from toolgate.gate.tools import Tool, ToolContext

logger = logging.getLogger(__name__)

MAX_EXPRESSION_LENGTH = 500
MAX_EXPONENT = 1000
MAX_MAGNITUDE = 10**100

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "abs": abs,
    "round": round,
    "min": min,
    "max": max,
    "sqrt": math.sqrt,
}


class CalculationError(ValueError):
    pass


def calculate(expression: str) -> int | float:
    """The value of the arithmetic ``expression`` (see module rules); CalculationError when it has none."""
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise CalculationError(f"expression longer than {MAX_EXPRESSION_LENGTH} characters")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as error:
        raise CalculationError(f"not an arithmetic expression: {error.msg}") from None
    try:
        return _evaluate(tree.body)
    except (ZeroDivisionError, OverflowError, ValueError, TypeError) as error:
        raise CalculationError(str(error) or type(error).__name__) from None


def _evaluate(node: ast.expr) -> Any:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_evaluate(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
            raise CalculationError(f"exponent larger than {MAX_EXPONENT}")
        return _bounded(_BINARY[type(node.op)](left, right))
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _FUNCTIONS
        and not node.keywords
    ):
        return _bounded(_FUNCTIONS[node.func.id](*(_evaluate(arg) for arg in node.args)))
    raise CalculationError(f"unsupported element: {ast.unparse(node)}")


def _bounded(value: Any) -> Any:
    if isinstance(value, complex):
        raise CalculationError("the result is not a real number")
    if abs(value) > MAX_MAGNITUDE:
        raise CalculationError("the result is too large")
    return value


def _current_date_time(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    return {"dateTime": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")}


def _calculate(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    expression = args.get("expression")
    if not isinstance(expression, str):
        return {"error": "'expression' must be a string"}
    try:
        return {"expression": expression, "result": calculate(expression)}
    except CalculationError as error:
        return {"expression": expression, "error": str(error)}


def _echo(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    return {"text": args.get("text", "")}


def _object_schema(
    properties: dict[str, Any] | None = None, required: list[str] | None = None
) -> dict[str, Any]:
    return {"type": "object", "properties": properties or {}, "required": required or []}


BUILTIN_TOOLS: dict[str, Tool] = {
    tool.name: tool
    for tool in (
        Tool(
            name="getCurrentDateTime",
            source="builtin",
            description="The current date and time in UTC, ISO 8601 (e.g. 2025-01-31T14:05:00Z).",
            parameters=_object_schema(),
            run=_current_date_time,
        ),
        Tool(
            name="calculate",
            source="builtin",
            description=(
                "Evaluate an arithmetic expression: numbers, + - * / // % **, parentheses, "
                "abs round min max sqrt."
            ),
            parameters=_object_schema(
                {"expression": {"type": "string", "description": "e.g. (12.5 * 4) + sqrt(16)"}},
                ["expression"],
            ),
            run=_calculate,
        ),
        Tool(
            name="echo",
            source="builtin",
            description="Return the given text unchanged.",
            parameters=_object_schema({"text": {"type": "string"}}, ["text"]),
            run=_echo,
        ),
    )
}
BUILTIN_TOOL_NAMES = tuple(BUILTIN_TOOLS)


def builtin_tools(names: list[str]) -> list[Tool]:
    """The built-in tools named in ``names``, in that order; unknown names are logged and skipped."""
    tools = []
    for name in names:
        if isinstance(name, str) and name in BUILTIN_TOOLS:
            tools.append(BUILTIN_TOOLS[name])
        else:
            logger.warning("unknown builtin tool %r ignored (known: %s)", name, ", ".join(BUILTIN_TOOL_NAMES))
    return tools
