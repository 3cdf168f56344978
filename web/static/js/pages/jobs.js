// Jobs: every ingestion job of the tenant with its progress and failures; one job opens live.

import { api, listCollections } from "../api.js";
import { clear, errorText, fmt, h, notice, pageHeader } from "../dom.js";
import { chunksEmbedded, jobBadge, jobPanel, startedAt } from "./job_panel.js";

// [query, label]: "with failures" also finds succeeded jobs some of whose documents failed.
const FILTERS = [
  ["", "any"],
  ["status=queued", "queued"],
  ["status=running", "running"],
  ["status=succeeded", "succeeded"],
  ["status=succeeded&failures=false", "completed, no failures"],
  ["failures=true", "with failures"],
  ["status=failed", "failed (all documents)"],
  ["status=cancelled", "cancelled"],
];

export async function render(root, ctx) {
  if (ctx.args[0]) {
    root.append(pageHeader("Job"), h("p", {}, h("a", { href: "#/jobs" }, "← all jobs")), await jobPanel(ctx.args[0], ctx));
    return;
  }
  const names = Object.fromEntries((await listCollections()).map((c) => [c.id, c.name]));
  const list = h("section", { "aria-label": "Jobs" });
  const filter = h("select", { id: "job-status", onchange: () => load() }, FILTERS.map(([q, label]) => h("option", { value: q }, label)));
  let timer;
  let latest = 0;
  ctx.onCleanup(() => clearTimeout(timer));

  async function load() {
    clearTimeout(timer);
    // NOTE: a filter changed while a list is loading starts another load; only the newest one renders.
    const mine = ++latest;
    const shown = filter.value;
    let jobs;
    try {
      jobs = await api(`/v1/jobs?limit=100${shown ? `&${shown}` : ""}`);
    } catch (err) {
      if (mine === latest) clear(list, notice("error", errorText(err)));
      return;
    }
    if (mine !== latest) return;
    clear(
      list,
      jobs.length
        ? h(
            "div",
            { class: "table-wrap" },
            h(
              "table",
              { id: "jobs-table", dataset: { filter: shown } },
              h("thead", {}, h("tr", {}, ["Job", "Collection", "Status", "Progress", "Indexed", "Failed", "Chunks", "Started", "Last activity"].map((t) => h("th", { scope: "col" }, t)))),
              h(
                "tbody",
                {},
                jobs.map((j) =>
                  h(
                    "tr",
                    { dataset: { status: j.status, failed: j.documents_failed } },
                    h("th", { scope: "row" }, h("a", { href: `#/jobs/${j.id}` }, h("code", {}, j.id.slice(0, 8)))),
                    h("td", {}, names[j.collection_id] ?? j.collection_id.slice(0, 8)),
                    h("td", {}, jobBadge(j)),
                    h("td", { class: "nowrap" }, h("progress", { max: 1, value: j.progress, "aria-label": `progress of job ${j.id.slice(0, 8)}` }), ` ${Math.round(j.progress * 100)}%`),
                    h("td", { class: "num" }, `${j.documents_done} / ${j.documents_total}`),
                    h("td", { class: "num" }, j.documents_failed ? h("a", { href: `#/jobs/${j.id}` }, j.documents_failed) : 0),
                    h("td", { class: "num" }, chunksEmbedded(j)),
                    h("td", {}, startedAt(j) ? fmt.time(startedAt(j)) : h("span", { class: "muted" }, `queued ${fmt.time(j.created_at)}`)),
                    h("td", {}, fmt.time(j.updated_at)),
                  ),
                ),
              ),
            ),
          )
        : h("p", { class: "empty" }, "No jobs."),
    );
    if (jobs.some((j) => j.status === "queued" || j.status === "running")) timer = setTimeout(load, 1500);
  }
  await load();
  root.append(pageHeader("Jobs", h("div", { class: "field inline" }, h("label", { for: "job-status" }, "Status"), filter)), list);
}
