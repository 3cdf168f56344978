// Evaluation runs: the tenant's runs with progress and main metric; each opens pages/eval.js.
// Runs are started by the CLI or POST /v1/evals, not here.

import { api } from "../api.js";
import { badge, clear, errorText, fmt, h, notice, pageHeader, poller } from "../dom.js";

export const ACTIVE = ["queued", "running"];
// The metric each kind is judged by (evals/metrics.py MAIN_METRIC).
export const MAIN_METRIC = { retrieval: "ndcg@10", answer: "token_f1", agent: "success" };

export function progressCell(run) {
  return [h("progress", { max: 1, value: run.fraction_done, "aria-label": `progress of ${run.name || run.id.slice(0, 8)}` }), ` ${run.items_done} / ${run.items_total}`];
}

function mainMetrics(run) {
  const main = MAIN_METRIC[run.kind];
  if (!main || run.metrics?.[main] === undefined) return "—";
  const best = run.metrics.sweep?.best;
  return [`${main} ${fmt.score(run.metrics[main])}`, best ? h("small", {}, ` · best ${best}`) : null];
}

function runsTable(runs) {
  if (!runs.length) return h("p", { class: "empty" }, "No evaluation runs yet. Start one with `groundwork eval` or POST /v1/evals.");
  return h(
    "div",
    { class: "table-wrap" },
    h(
      "table",
      { id: "eval-runs" },
      h("thead", {}, h("tr", {}, ["Name", "Kind", "Status", "Progress", "Main metric", "Created"].map((t) => h("th", { scope: "col" }, t)))),
      h(
        "tbody",
        {},
        runs.map((r) =>
          h(
            "tr",
            { dataset: { status: r.status, id: r.id } },
            h("th", { scope: "row" }, h("a", { href: `#/eval/${r.id}` }, r.name || h("code", {}, r.id.slice(0, 8)))),
            h("td", {}, r.kind),
            h("td", {}, badge(r.status)),
            h("td", { class: "nowrap" }, progressCell(r)),
            h("td", { class: "num" }, mainMetrics(r)),
            h("td", { class: "nowrap" }, fmt.time(r.created_at)),
          ),
        ),
      ),
    ),
  );
}

export async function render(root, ctx) {
  const list = h("section", { "aria-label": "Evaluation runs" });
  const schedule = poller(ctx);

  async function load() {
    schedule();
    try {
      const runs = await api("/v1/evals?limit=100");
      clear(list, runsTable(runs));
      if (runs.some((r) => ACTIVE.includes(r.status))) schedule(load, 2000);
    } catch (err) {
      clear(list, notice("error", errorText(err)));
    }
  }
  await load();
  root.append(pageHeader("Evaluations"), list);
}
