// Agent runs: the tenant's runs, newest first, and a form that starts one in the background and
// opens its page (pages/agent.js), where its steps appear as they happen.

import { api, listCollections } from "../api.js";
import { badge, clear, errorText, fmt, h, notice, pageHeader, poller } from "../dom.js";
import { clearErrors, fieldError, showErrors } from "../forms.js";

export const ACTIVE = ["queued", "running"];
const KINDS = { react: "ReAct", rewoo: "ReWOO", plan_execute: "Plan and execute" };

export const clip = (text, n) => (text && text.length > n ? `${text.slice(0, n - 1)}…` : (text ?? ""));
export const tokens = (usage) => (usage?.prompt_tokens ?? 0) + (usage?.completion_tokens ?? 0);

/** A run whose "answer" is a tool's raw error message (agents/graphs/common.py writes "Error: …"
 * observations): it did not answer the task, whatever its finish reason says. */
export const toolErrorAnswer = (run) => Boolean(run.answer && /^\s*Error:/.test(run.answer));
/** The finish shown: "tool error" instead of "answered" for such a run. */
export const finishLabel = (run) => (toolErrorAnswer(run) ? "tool error" : run.finish_reason ?? "—");

function runsTable(runs) {
  if (!runs.length) return h("p", { class: "empty" }, "No agent runs yet.");
  return h(
    "div",
    { class: "table-wrap" },
    h(
      "table",
      { id: "agent-runs" },
      h("thead", {}, h("tr", {}, ["Run", "Status", "Agent", "Input", "Finish", "Tokens", "Created"].map((t) => h("th", { scope: "col" }, t)))),
      h(
        "tbody",
        {},
        runs.map((r) =>
          h(
            "tr",
            { dataset: { status: r.status, id: r.id } },
            h("th", { scope: "row" }, h("a", { href: `#/agent/${r.id}` }, h("code", {}, r.id.slice(0, 8)))),
            h("td", {}, badge(r.status)),
            h("td", { class: "nowrap" }, KINDS[r.agent] ?? r.agent),
            h("td", { class: "run-input", title: r.input }, clip(r.input, 90)),
            h("td", {}, toolErrorAnswer(r) ? h("span", { class: "badge badge-failed" }, finishLabel(r)) : finishLabel(r)),
            h("td", { class: "num" }, tokens(r.usage) || "—"),
            h("td", { class: "nowrap" }, fmt.time(r.created_at)),
          ),
        ),
      ),
    ),
  );
}

const EXAMPLE_TOOL = [
  {
    type: "function",
    function: {
      name: "lookup_customer",
      description: "Look up a customer's plan by their name.",
      parameters: { type: "object", properties: { name: { type: "string", minLength: 1, maxLength: 40 } }, required: ["name"] },
    },
  },
];
const SCHEMA_TYPES = ["object", "string", "number", "integer", "boolean", "array", "null"];

/** Problems of a client-tool list (OpenAI function tools whose `parameters` is a JSON Schema), in
 * words; [] when it is fine. The server checks again: this says what is wrong while typing. */
export function toolProblems(text) {
  if (!text.trim()) return [];
  let tools;
  try {
    tools = JSON.parse(text);
  } catch (err) {
    return [`Not valid JSON: ${err.message}`];
  }
  if (!Array.isArray(tools)) return ["Give a JSON list of tools: [ {\"type\": \"function\", \"function\": {…}} ]"];
  const out = [];
  const walk = (schema, where) => {
    if (typeof schema !== "object" || schema === null || Array.isArray(schema)) return out.push(`${where}: a schema is a JSON object`);
    if (schema.type !== undefined && ![schema.type].flat().every((t) => SCHEMA_TYPES.includes(t))) out.push(`${where}.type: one of ${SCHEMA_TYPES.join(", ")}`);
    for (const [name, sub] of Object.entries(schema.properties ?? {})) walk(sub, `${where}.properties.${name}`);
    if (schema.required !== undefined && (!Array.isArray(schema.required) || schema.required.some((r) => !(r in (schema.properties ?? {}))))) out.push(`${where}.required: names of its properties`);
    if (schema.items !== undefined) walk(schema.items, `${where}.items`);
  };
  tools.forEach((t, i) => {
    const fn = t?.function;
    const at = `tool ${i + 1}`;
    if (t?.type !== "function" || typeof fn !== "object") return out.push(`${at}: needs "type": "function" and a "function" object`);
    if (!/^[A-Za-z0-9_-]{1,64}$/.test(fn.name ?? "")) out.push(`${at}: "name" of letters, digits, _ or - (at most 64)`);
    if (fn.parameters === undefined) return;
    if (fn.parameters?.type !== "object") out.push(`${at} (${fn.name}): "parameters" must be a schema of "type": "object"`);
    else walk(fn.parameters, `${fn.name}.parameters`);
  });
  return out;
}

function check(box, label, attrs = {}) {
  return h("label", { class: "check", for: box.id }, box, ` ${label}`, attrs.hint ? h("span", { class: "muted" }, ` — ${attrs.hint}`) : null);
}

async function startForm() {
  const [collections, catalog] = await Promise.all([listCollections(), api("/v1/agents/tools")]);
  const remembered = sessionStorage.getItem("groundwork.collection");
  const agent = h("select", { id: "agent-kind" }, Object.entries(KINDS).map(([k, label]) => h("option", { value: k }, `${label} (${k})`)));
  const task = h("textarea", { id: "agent-task", rows: 3, required: true, maxlength: 4000, placeholder: "A task the documents help with" });
  const pickedCollections = collections.map((c, i) => h("input", { type: "checkbox", id: `agent-col-${i}`, value: c.id, checked: c.id === remembered || (!remembered && i === 0) }));
  const builtins = catalog.builtin.map((t) => h("input", { type: "checkbox", id: `agent-tool-${t.name}`, value: t.name, checked: t.default }));
  const mcpServers = catalog.mcp_servers.map((name) => h("input", { type: "checkbox", id: `agent-mcp-${name}`, value: name }));
  const clientTools = h("textarea", { id: "agent-client-tools", rows: 6, spellcheck: false, class: "code", placeholder: "[] — function tools your side runs; the run waits for their outputs" });
  const toolsHint = h("p", { class: "muted", id: "agent-client-tools-state" }, "No client tools.");
  const validate = () => {
    const problems = toolProblems(clientTools.value);
    clientTools.toggleAttribute("aria-invalid", problems.length > 0);
    // NOTE: not .field-error: clearErrors removes those, and this line stays with the field.
    toolsHint.className = problems.length ? "tools-state invalid" : "tools-state muted";
    toolsHint.textContent = problems.length ? problems.join(" · ") : clientTools.value.trim() ? `${JSON.parse(clientTools.value).length} client tool(s), schemas valid.` : "No client tools.";
    return problems;
  };
  clientTools.setAttribute("aria-describedby", toolsHint.id);
  clientTools.addEventListener("input", validate);
  const example = h("button", { type: "button", class: "link", onclick: () => ((clientTools.value = JSON.stringify(EXAMPLE_TOOL, null, 2)), validate()) }, "Insert an example tool");
  const budgetProps = catalog.budgets.properties ?? {};
  const budgets = Object.entries(budgetProps).map(([name, p]) =>
    h("input", { type: "number", id: `agent-budget-${name}`, name, value: String(p.default ?? ""), min: p.minimum ?? p.exclusiveMinimum ?? null, max: p.maximum ?? null, step: p.type === "integer" ? 1 : "any" }),
  );
  const review = h("input", { type: "checkbox", id: "agent-review-plan" });
  const reviewLabel = check(review, "Pause after planning to review the plan", { hint: "ReWOO and Plan-and-execute" });
  const syncReview = () => {
    review.disabled = agent.value === "react";
    if (review.disabled) review.checked = false;
  };
  agent.addEventListener("change", syncReview);
  syncReview();
  const status = h("div", { "aria-live": "polite" });
  const submit = h("button", { type: "submit", class: "primary" }, "Start run");
  const form = h(
    "form",
    { class: "card run-form", "aria-label": "Start an agent run", novalidate: true },
    h("h2", {}, "Start a run"),
    h("div", { class: "field inline" }, h("label", { for: "agent-kind" }, "Agent"), agent),
    h("div", { class: "field" }, h("label", { for: "agent-task" }, "Task"), task),
    h("fieldset", { class: "field", id: "agent-collections" }, h("legend", {}, "Collections (none: all)"), h("div", { class: "checks" }, pickedCollections.map((box, i) => check(box, collections[i].name)))),
    h("fieldset", { class: "field", id: "agent-tools" }, h("legend", {}, "Built-in tools"), h("div", { class: "checks" }, builtins.map((box, i) => check(box, box.value, { hint: catalog.builtin[i].description })))),
    h(
      "fieldset",
      { class: "field", id: "agent-mcp" },
      h("legend", {}, "MCP servers (their tools, beside the built-in ones checked)"),
      mcpServers.length
        ? h("div", { class: "checks" }, mcpServers.map((box) => check(box, box.value)))
        : h("p", { class: "muted" }, "None allowlisted for this tenant (settings mcp.servers; see ", h("a", { href: "#/mcp" }, "MCP"), ")."),
    ),
    h("div", { class: "field" }, h("label", { for: "agent-client-tools" }, "Client tools (JSON: OpenAI function tools, parameters as JSON Schema)"), clientTools, toolsHint, example),
    h("fieldset", { class: "field" }, h("legend", {}, "Budgets"), h("div", { class: "grid budgets" }, budgets.map((b) => h("div", { class: "field" }, h("label", { for: b.id }, budgetProps[b.name].description ?? b.name, h("span", { class: "muted" }, ` (${b.name})`)), b)))),
    h("div", { class: "field inline" }, reviewLabel),
    status,
    h("div", { class: "actions" }, submit),
  );
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    clearErrors(form);
    if (!task.value.trim()) return fieldError(task, "Say what the agent should do.");
    if (validate().length) return clientTools.focus();
    const budgetValues = Object.fromEntries(budgets.filter((b) => b.value !== "").map((b) => [b.name, Number(b.value)]));
    const body = {
      agent: agent.value,
      input: task.value.trim(),
      collections: pickedCollections.filter((b) => b.checked).map((b) => b.value),
      tools: [...builtins.filter((b) => b.checked).map((b) => b.value), ...(clientTools.value.trim() ? JSON.parse(clientTools.value) : [])],
      mcp_servers: mcpServers.filter((b) => b.checked).map((b) => b.value),
      budgets: budgetValues,
      review_plan: review.checked,
      background: true, // the API answers at once (202); the run page follows its steps
    };
    submit.disabled = true;
    try {
      const run = await api("/v1/agents/runs", { method: "POST", json: body });
      location.hash = `#/agent/${run.id}`;
    } catch (err) {
      const fields = { input: task, tools: clientTools, ...Object.fromEntries(budgets.map((b) => [`budgets.${b.name}`, b])) };
      showErrors(form, status, err, fields);
      submit.disabled = false;
    }
  });
  return form;
}

export async function render(root, ctx) {
  const list = h("section", { "aria-label": "Agent runs" });
  const schedule = poller(ctx);

  async function load() {
    schedule();
    try {
      const { data } = await api("/v1/agents/runs?limit=100");
      clear(list, runsTable(data));
      // While some run works, its row follows it.
      if (data.some((r) => ACTIVE.includes(r.status))) schedule(load, 2000);
    } catch (err) {
      clear(list, notice("error", errorText(err)));
    }
  }
  await load();
  root.append(pageHeader("Agent runs"), await startForm(), list);
}
