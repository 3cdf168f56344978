// One agent run: its answer with citations, what stopped it, its usage and its trace step by step.
// While it is queued or running the page polls it, so that steps appear as the agent takes them.

import { api } from "../api.js";
import { badge, clear, errorText, fmt, h, notice, pageHeader, poller } from "../dom.js";
import { fieldError, showErrors } from "../forms.js";
import { ACTIVE, clip, finishLabel, tokens, toolErrorAnswer } from "./agents.js";
import { citationList, claimedAnswer, groundingLine, linked } from "./answer.js";

const OBSERVATION_CHARS = 400;
const json = (value) => JSON.stringify(value ?? {}, null, 0);

/** A finished run that wrote no answer says so, with what stopped it: nothing stands in for one. */
function noAnswerCard(run) {
  if (!run.finished_at) return null;
  return h(
    "section",
    { class: "card", "aria-label": "Answer", id: "run-no-answer" },
    h("h2", {}, "No answer"),
    h("p", {}, `The run ended without an answer (${run.finish_reason ?? "unknown"})${run.detail ? `: ${run.detail}` : "."}`),
  );
}

function answerCard(run) {
  if (!run.answer) return noAnswerCard(run);
  const citations = run.citations ?? [];
  if (toolErrorAnswer(run)) {
    return h(
      "section",
      { class: "card", "aria-label": "Answer" },
      h("h2", {}, "No answer"),
      notice("error", "The run ended on a tool's error message instead of an answer to the task:"),
      h("pre", { class: "observation", id: "run-answer" }, run.answer),
    );
  }
  // The run's claim check (agents/runs/grounding.py) marks sentences by the run's source numbers.
  const claims = run.claims?.length ? run.claims : null;
  const numbered = citations.map((c) => ({ ...c, citation: c.number }));
  const panel = h("div", { class: "evidence", "aria-live": "polite", hidden: true });
  return h(
    "section",
    { class: "card", "aria-label": "Answer" },
    h("h2", {}, "Answer"),
    h("div", { class: "answer", id: "run-answer" }, claims ? claimedAnswer(run.answer, claims, numbered, panel) : linked(run.answer, citations, "number")),
    claims ? groundingLine(claims) : h("p", { class: "grounding grounding-none" }, "Not checked sentence by sentence against the sources; follow the citations."),
    panel,
    citationList(citations, "number") ?? h("p", { class: "muted" }, "No citations."),
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
    ["Finish", finishLabel(run)],
    ["Tokens", `${tokens(usage)} (${usage.prompt_tokens ?? 0} in, ${usage.completion_tokens ?? 0} out)`],
    ["Tools", [...run.tools, ...run.client_tools].join(", ") || "none"],
    ["MCP servers", run.mcp_servers?.length ? run.mcp_servers.join(", ") : "none"],
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
    case "claim_check":
      return h("p", {}, `${step.unsupported} of ${step.sentences} sentences unsupported`,
        step.missing?.length ? ` · leaves out ${step.missing.join(", ")}` : "", step.model ? ` · answer by ${step.model}` : "");
    case "escalation":
      return h("p", {}, h("strong", {}, step.reason), ` · ${step.from} gave way to the next model`);
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

/** A plan as the reviewer edits it: one step a line for plans of plain steps, JSON otherwise. */
const planText = (plan) => (plan.every((p) => typeof p === "string") ? plan.join("\n") : JSON.stringify(plan.map(({ tool, input }) => ({ tool, input })), null, 2));

function readPlan(text, original) {
  if (original.every((p) => typeof p === "string")) return text.split("\n").map((l) => l.trim()).filter(Boolean);
  const plan = JSON.parse(text); // SyntaxError: said beside the field
  if (!Array.isArray(plan)) throw new SyntaxError("a plan is a JSON list of steps");
  return plan;
}

/** What the run waits for, with the form that answers it: a plan review (POST …/plan: approve, or
 * replace with the edited plan) or client tool outputs (POST …/tool_outputs). `send(path, body,
 * form, status, fields)` posts and follows the resumed run. */
function pending(action, send) {
  if (!action) return null;
  const status = h("div", { "aria-live": "polite" });
  if (action.type === "review_plan") {
    const plan = action.plan ?? [];
    const editor = h("textarea", { id: "plan-editor", class: "code", rows: Math.min(14, 2 + plan.length * 4), spellcheck: false }, planText(plan));
    const form = h("form", { class: "plan-review", "aria-label": "Review the plan" });
    const approve = h("button", { type: "button", class: "primary", onclick: () => send("plan", {}, form, status, {}) }, "Approve plan as is");
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      let edited;
      try {
        edited = readPlan(editor.value, plan);
      } catch (err) {
        return fieldError(editor, `Not a plan: ${err.message}`);
      }
      send("plan", { plan: edited }, form, status, { plan: editor });
    });
    form.append(
      planList(plan),
      h("div", { class: "field" }, h("label", { for: "plan-editor" }, plan.every((p) => typeof p === "string") ? "Plan (one step a line)" : 'Plan (JSON: [{"tool", "input"}, …]; #E1… refer to earlier steps\' results)'), editor),
      status,
      h("div", { class: "actions" }, approve, h("button", { type: "submit", class: "secondary" }, "Run the edited plan")),
    );
    return h("section", { class: "card waiting", id: "run-pending" }, h("h2", {}, "Waiting for a plan review"), form);
  }
  const calls = action.tool_calls ?? [];
  const outputs = calls.map((c, i) => h("textarea", { id: `tool-output-${i}`, rows: 3, maxlength: 20000, required: true, dataset: { call: c.id } }));
  const form = h(
    "form",
    { class: "tool-outputs", "aria-label": "Answer the tool calls" },
    calls.map((c, i) =>
      h(
        "div",
        { class: "field" },
        h("label", { for: outputs[i].id }, "Output of ", h("code", { class: "tool" }, c.name), " ", h("code", { class: "args" }, json(c.arguments)), h("span", { class: "muted" }, ` (call ${c.id})`)),
        outputs[i],
      ),
    ),
    status,
    h("div", { class: "actions" }, h("button", { type: "submit", class: "primary" }, "Send tool outputs")),
  );
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const empty = outputs.find((o) => !o.value.trim());
    if (empty) return fieldError(empty, "Give this call's output (what your side's tool returned).");
    const body = { tool_outputs: outputs.map((o) => ({ tool_call_id: o.dataset.call, output: o.value })) };
    send("tool_outputs", body, form, status, { tool_outputs: outputs[0] });
  });
  return h("section", { class: "card waiting", id: "run-pending" }, h("h2", {}, "Waiting for client tool outputs"), form);
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

  // The answer to a pending action resumes the run; the POST returns at its next stop, while polling
  // shows the steps it takes meanwhile.
  function send(path, json, form, formStatus, fields) {
    for (const b of form.querySelectorAll("button")) b.disabled = true;
    clear(formStatus, notice("info", "Resuming the run…"));
    api(`/v1/agents/runs/${id}/${path}`, { method: "POST", json })
      .then(draw)
      .catch((err) => {
        showErrors(form, formStatus, err, fields);
        for (const b of form.querySelectorAll("button")) b.disabled = false;
      });
    schedule(poll, 700);
  }

  let drawnAction = null;
  function draw(run) {
    const finished = Boolean(run.finished_at);
    clear(headActions, finished ? null : h("button", { type: "button", class: "danger", onclick: (e) => cancel(e.currentTarget) }, "Cancel run"));
    clear(
      body,
      summary(run),
      h("section", { class: "card", "aria-label": "Task" }, h("h2", {}, "Task"), h("p", { class: "run-task" }, run.input)),
      run.detail ? notice(run.finish_reason === "answered" ? "info" : "error", `${run.finish_reason}: ${run.detail}`) : null,
      // NOTE: the pending form is kept while the same action waits, so a poll does not wipe what is typed.
      samePending(run) ? body.querySelector("#run-pending") : pending(run.required_action, send),
      answerCard(run),
      h("section", { class: "card", "aria-label": "Trace" }, h("h2", {}, `Trace (${run.trace?.length ?? 0} steps)`), traceList(run.trace)),
    );
    drawnAction = JSON.stringify(run.required_action ?? null);
    schedule(ACTIVE.includes(run.status) ? poll : null, 1000);
  }
  const samePending = (run) => run.required_action && drawnAction === JSON.stringify(run.required_action) && body.querySelector("#run-pending");

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
