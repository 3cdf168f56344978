// Evaluation runs: the tenant's runs with progress and main metric; each opens pages/eval.js.
// A form above the list starts one (pages/eval_form.js).

import { api } from "../api.js";
import { badge, clear, errorText, fmt, h, notice, pageHeader, poller } from "../dom.js";
import { evalForm } from "./eval_form.js";

export const ACTIVE = ["queued", "running"];
// The metric each kind is judged by (evals/metrics.py MAIN_METRIC).
export const MAIN_METRIC = { retrieval: "ndcg@10", answer: "token_f1", agent: "success" };

/** Where a run is: while its corpus is ingested the items counter is still 0 / 0, so the stage's
 * own counts (evals/prepare.py: done, total) are the progress then. */
function stageProgress(run) {
  const p = run.progress ?? {};
  if (p.stage === "ingesting" && p.total) return { done: p.done ?? 0, total: p.total, what: "documents ingested" };
  return { done: run.items_done, total: run.items_total, what: "items" };
}

export function progressText(run) {
  const { done, total, what } = stageProgress(run);
  const stage = run.progress?.stage ?? run.status;
  return total ? `${stage}: ${Math.round((100 * done) / total)}% (${done} / ${total} ${what})` : stage;
}

export function progressCell(run) {
  const { done, total } = stageProgress(run);
  return [h("progress", { max: 1, value: total ? done / total : 0, "aria-label": `progress of ${run.name || run.id.slice(0, 8)}` }), ` ${done} / ${total}`];
}

/** The main metric of the variant that counts: a sweep's best (not its first variant's). */
function mainMetrics(run) {
  const main = MAIN_METRIC[run.kind];
  const best = run.metrics?.sweep?.best;
  const v = best ? run.metrics.variants?.[best]?.[main] : run.metrics?.[main];
  if (!main || v === undefined) return "—";
  return [`${main} ${fmt.score(v)}`, best ? h("small", {}, ` · best: ${best}`) : null];
}

function runsTable(runs) {
  if (!runs.length) return h("p", { class: "empty" }, "No evaluation runs yet. Start one with the form above, `groundwork eval` or POST /v1/evals.");
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
  root.append(pageHeader("Evaluations"), await evalForm(), list);
}
