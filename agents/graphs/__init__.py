"""The agent graphs by kind; each module's `build_graph()` returns an uncompiled StateGraph."""

from agents.graphs import plan_execute, react, rewoo

BUILDERS = {"react": react.build_graph, "rewoo": rewoo.build_graph, "plan_execute": plan_execute.build_graph}
PLAN_CHECKS = {"rewoo": rewoo.check_plan, "plan_execute": plan_execute.check_plan}
KINDS = tuple(BUILDERS)
