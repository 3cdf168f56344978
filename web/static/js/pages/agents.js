// Agent runs: the tenant's runs, newest first, and a form that starts one in the background and
// opens its page (pages/agent.js), where its steps appear as they happen.

import { api } from "../api.js";
import { badge, clear, collectionPicker, errorText, fmt, h, notice, pageHeader, poller } from "../dom.js";

export const ACTIVE = ["queued", "running"];
const KINDS = { react: "ReAct", rewoo: "ReWOO", plan_execute: "Plan and execute" };

export const clip = (text, n) => (text && text.length > n ? `${text.slice(0, n - 1)}…` : (text ?? ""));
export const tokens = (usage) => (usage?.prompt_tokens ?? 0) + (usage?.completion_tokens ?? 0);

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
            h("td", {}, r.finish_reason ?? "—"),
            h("td", { class: "num" }, tokens(r.usage) || "—"),
            h("td", { class: "nowrap" }, fmt.time(r.created_at)),
          ),
        ),
      ),
    ),
  );
}

async function startForm() {
  const picker = await collectionPicker(null, (c) => (collection = c));
  let collection = picker.collection;
  const agent = h("select", { id: "agent-kind" }, Object.entries(KINDS).map(([k, label]) => h("option", { value: k }, `${label} (${k})`)));
  const task = h("textarea", { id: "agent-task", rows: 3, required: true, maxlength: 4000, placeholder: "A task the documents help with" });
  const status = h("div", { "aria-live": "polite" });
  const submit = h("button", { type: "submit", class: "primary" }, "Start run");
  const form = h(
    "form",
    { class: "card run-form", "aria-label": "Start an agent run" },
    h("h2", {}, "Start a run"),
    h("div", { class: "toolbar" }, h("div", { class: "field inline" }, h("label", { for: "agent-kind" }, "Agent"), agent), picker.el),
    h("div", { class: "field" }, h("label", { for: "agent-task" }, "Task"), task),
    status,
    h("div", { class: "actions" }, submit),
  );
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    if (!task.value.trim()) return;
    submit.disabled = true;
    try {
      // background: the API answers at once (202); the run page follows its steps.
      const body = { agent: agent.value, input: task.value.trim(), collections: collection ? [collection.id] : [], background: true };
      const run = await api("/v1/agents/runs", { method: "POST", json: body });
      location.hash = `#/agent/${run.id}`;
    } catch (err) {
      clear(status, notice("error", errorText(err)));
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
