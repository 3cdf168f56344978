// One agent run: its answer with citations, what stopped it, its usage and its trace step by step.
// While it is queued or running the page polls it, so that steps appear as the agent takes them.

import { api } from "../api.js";
import { badge, clear, errorText, fmt, h, notice, pageHeader, poller } from "../dom.js";
import { ACTIVE, clip, tokens } from "./agents.js";
import { citationHref } from "./ask.js";

const OBSERVATION_CHARS = 400;
const json = (value) => JSON.stringify(value ?? {}, null, 0);

/** The answer with each [n] linked to the source the run numbered n. */
function linkedAnswer(answer, citations) {
  const byNumber = new Map(citations.map((c) => [c.number, c]));
  return answer.split(/(\[\d+\])/).map((part) => {
    const c = byNumber.get(Number(part.match(/^\[(\d+)\]$/)?.[1]));
    return c ? h("a", { href: citationHref(c), class: "cite" }, part) : part;
  });
}

function answerCard(run) {
  if (!run.answer) return null;
  const citations = run.citations ?? [];
  return h(
    "section",
    { class: "card", "aria-label": "Answer" },
    h("h2", {}, "Answer"),
    h("div", { class: "answer", id: "run-answer" }, linkedAnswer(run.answer, citations)),
    citations.length
      ? h(
          "ol",
          { class: "citations", "aria-label": "Citations" },
          citations.map((c) =>
            h("li", { value: c.number }, h("a", { href: citationHref(c), class: "citation-link" }, c.source_id || c.title, c.page ? `, page ${c.page}` : "", ` (chars ${c.char_start}–${c.char_end})`)),
          ),
        )
      : h("p", { class: "muted" }, "No citations."),
  );
}

/** Usage so far from the trace's model calls: the run's own `usage` is written when a segment ends. */
function traceUsage(trace) {
  const llm = (trace ?? []).filter((s) => s.type === "llm");
  const sum = (k) => llm.reduce((n, s) => n + (s.usage?.[k] ?? 0), 0);
  const calls = (trace ?? []).filter((s) => s.type === "tool_call").length;
  return { prompt_tokens: sum("prompt_tokens"), completion_tokens: sum("completion_tokens"), llm_calls: llm.length, tool_calls: calls };
}

function summary(run) {
  const usage = Object.keys(run.usage ?? {}).length ? run.usage : traceUsage(run.trace);
  const items = [
    ["Status", badge(run.status)],
    ["Agent", run.agent],
    ["Finish", run.finish_reason ?? "—"],
    ["Tokens", `${tokens(usage)} (${usage.prompt_tokens ?? 0} in, ${usage.completion_tokens ?? 0} out)`],
    ["Calls", `${usage.llm_calls ?? 0} model, ${usage.tool_calls ?? 0} tool`],
    ["Active", fmt.duration(run.active_s)],
    ["Created", fmt.time(run.created_at)],
    ["Finished", fmt.time(run.finished_at)],
  ];
  return h("dl", { class: "facts", id: "run-summary" }, items.map(([k, v]) => h("div", {}, h("dt", {}, k), h("dd", {}, v))));
}

function planList(plan) {
  return h("ol", { class: "plan" }, plan.map((s) => h("li", {}, typeof s === "string" ? s : h("code", {}, s.id ? `#${s.id} ` : "", s.tool ? `${s.tool}[${s.input ?? ""}]` : json(s)))));
}

/** One trace entry (agents/graphs/common.py `emit`): what it is and its essentials. */
function stepBody(step) {
  switch (step.type) {
    case "llm":
      return [
        h("span", { class: "muted" }, `${step.node} · ${tokens(step.usage)} tokens · ${fmt.ms(step.ms)}`),
        step.tool_calls?.length ? h("div", {}, "calls ", step.tool_calls.map((c, i) => [i ? ", " : "", h("code", {}, c.name)])) : null,
      ];
    case "tool_call":
    case "loop_guard":
      return [h("code", { class: "tool" }, step.name), " ", h("code", { class: "args" }, json(step.arguments)), step.error ? h("p", { class: "reason" }, step.error) : null];
    case "tool_result":
      return [h("code", { class: "tool" }, step.name), h("pre", { class: "observation" }, clip(step.output, OBSERVATION_CHARS))];
    case "plan":
      return [step.edited ? "edited by the caller" : step.replanned ? "replanned" : null, planList(step.plan ?? [])];
    case "answer":
      return h("p", { class: "observation" }, clip(step.answer, OBSERVATION_CHARS));
    case "stopped":
      return h("p", {}, h("strong", {}, step.finish_reason), `: ${step.detail ?? ""}`);
    default:
      return null;
  }
}

function traceList(trace) {
  if (!trace?.length) return h("p", { class: "empty" }, "No steps yet.");
  const t0 = trace[0].at;
  return h(
    "ol",
    { class: "trace", id: "run-trace" },
    trace.map((step) =>
      h(
        "li",
        { class: `step step-${step.type}`, dataset: { type: step.type } },
        h("span", { class: "step-type" }, step.type.replace("_", " ")),
        h("div", { class: "step-body" }, stepBody(step)),
        step.at && t0 ? h("span", { class: "step-at muted" }, `+${(step.at - t0).toFixed(1)} s`) : null,
      ),
    ),
  );
}

/** What the run waits for: client tool outputs (POST …/tool_outputs) or a plan review (POST …/plan). */
function pending(action) {
  if (!action) return null;
  if (action.type === "review_plan") {
    return h("section", { class: "card waiting", id: "run-pending" }, h("h2", {}, "Waiting for a plan review"), planList(action.plan ?? []), h("p", { class: "muted" }, "Approve or replace it with POST /v1/agents/runs/{id}/plan."));
  }
  return h(
    "section",
    { class: "card waiting", id: "run-pending" },
    h("h2", {}, "Waiting for client tool outputs"),
    h("ul", {}, (action.tool_calls ?? []).map((c) => h("li", {}, h("code", { class: "tool" }, c.name), " ", h("code", { class: "args" }, json(c.arguments)), h("span", { class: "muted" }, ` (call ${c.id})`)))),
    h("p", { class: "muted" }, "The caller answers with POST /v1/agents/runs/{id}/tool_outputs."),
  );
}

export async function render(root, ctx) {
  const id = ctx.args[0];
  const body = h("div", { class: "run" });
  const status = h("div", { "aria-live": "polite" });
  const headActions = h("div", { class: "head-actions" });
  const schedule = poller(ctx);

  async function cancel(button) {
    button.disabled = true;
    try {
      draw(await api(`/v1/agents/runs/${id}/cancel`, { method: "POST" }));
    } catch (err) {
      clear(status, notice("error", errorText(err)));
      button.disabled = false;
    }
  }

  function draw(run) {
    const finished = Boolean(run.finished_at);
    clear(headActions, finished ? null : h("button", { type: "button", class: "danger", onclick: (e) => cancel(e.currentTarget) }, "Cancel run"));
    clear(
      body,
      summary(run),
      h("section", { class: "card", "aria-label": "Task" }, h("h2", {}, "Task"), h("p", { class: "run-task" }, run.input)),
      run.detail ? notice(run.finish_reason === "answered" ? "info" : "error", `${run.finish_reason}: ${run.detail}`) : null,
      pending(run.required_action),
      answerCard(run),
      h("section", { class: "card", "aria-label": "Trace" }, h("h2", {}, `Trace (${run.trace?.length ?? 0} steps)`), traceList(run.trace)),
    );
    schedule(ACTIVE.includes(run.status) ? poll : null, 1000);
  }

  async function poll() {
    try {
      draw(await api(`/v1/agents/runs/${id}`));
    } catch (err) {
      clear(status, notice("error", errorText(err)));
      schedule(poll, 3000); // a hiccup (restart, network) should not end the live view
    }
  }

  draw(await api(`/v1/agents/runs/${id}`));
  root.append(pageHeader(`Agent run ${id.slice(0, 8)}`, headActions), h("p", {}, h("a", { href: "#/agents" }, "← all agent runs")), status, body);
}
