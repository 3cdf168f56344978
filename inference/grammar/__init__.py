"""Grammar-constrained decoding (JSON schema, regex, EBNF, choice, tool calls) on xgrammar.

See README.md in this package for how the engine drives it each step.
"""

from inference.grammar.engine_hook import EngineGrammars
from inference.grammar.matcher import GrammarBitmask, SequenceGrammar
from inference.grammar.service import GrammarService
from inference.grammar.spec import StructuredOutputSpec, parse_structured_output
from inference.grammar.tool_parser import ParsedOutput, ToolCallDelta, ToolCallParser, parse_tool_calls

__all__ = [
    "EngineGrammars",
    "GrammarBitmask",
    "GrammarService",
    "ParsedOutput",
    "SequenceGrammar",
    "StructuredOutputSpec",
    "ToolCallDelta",
    "ToolCallParser",
    "parse_structured_output",
    "parse_tool_calls",
]
