// One ingestion job, live: progress, per-stage counters, rate and ETA, each document's status and
// failure reason, cancel and requeue. Polls the job while it is open.

import { api } from "../api.js";
import { badge, clear, errorText, fmt, h, notice } from "../dom.js";

const STAGES = ["queued", "parsing", "chunking", "embedding", "indexed", "failed"];
const OPEN = new Set(["queued", "running"]);
const POLL_MS = 700;

function counters(job) {
  return h(
    "dl",
    { class: "counters" },
    STAGES.map((s) => h("div", { class: `counter counter-${s}` }, h("dt", {}, s), h("dd", { "data-stage": s }, job.documents_by_status[s] ?? 0))),
  );
}

function stageTimes(job) {
  const times = Object.entries(job.stages).filter(([k]) => k.endsWith("_s"));
  if (!times.length) return null;
  return h("p", { class: "muted" }, "Time per stage: ", times.map(([k, v]) => `${k.slice(0, -2)} ${v.toFixed(2)} s`).join(" · "));
}

function documentsTable(docs) {
  return h(
    "div",
    { class: "table-wrap" },
    h(
      "table",
      { class: "job-documents" },
      h("thead", {}, h("tr", {}, ["Document", "Status", "Reason"].map((t) => h("th", { scope: "col" }, t)))),
      h(
        "tbody",
        {},
        docs.map((d) =>
          h(
            "tr",
            { dataset: { status: d.status, source: d.source_id } },
            h("th", { scope: "row" }, d.status === "indexed" ? h("a", { href: `#/document/${d.id}` }, d.source_id) : d.source_id),
            h("td", {}, badge(d.status)),
            h("td", { class: "reason" }, d.error ?? ""),
          ),
        ),
      ),
    ),
  );
}

export async function jobPanel(jobId, ctx) {
  const panel = h("div", { class: "card job", id: `job-${jobId}` });
  const seen = []; // (time, finished documents) for the rate
  let timer = null;
  let stopped = false;
  const stop = () => {
    stopped = true;
    clearTimeout(timer);
  };
  ctx.onCleanup(stop);

  const action = (label, path, cls) =>
    h(
      "button",
      {
        type: "button",
        class: cls,
        onclick: async (e) => {
          e.target.disabled = true;
          try {
            await api(path, { method: "POST" });
            seen.length = 0;
            stopped = false;
            await refresh();
          } catch (err) {
            panel.append(notice("error", errorText(err)));
          }
        },
      },
      label,
    );

  const refresh = async () => {
    clearTimeout(timer);
    let job, docs;
    try {
      job = await api(`/v1/jobs/${jobId}`);
      docs = await api(`/v1/collections/${job.collection_id}/documents?job_id=${jobId}&limit=1000`);
    } catch (err) {
      clear(panel, notice("error", errorText(err)));
      return;
    }
    const finished = job.documents_done + job.documents_failed;
    seen.push([performance.now() / 1000, finished]);
    const [t0, n0] = seen[0];
    const elapsed = performance.now() / 1000 - t0;
    const rate = elapsed > 0.5 ? (finished - n0) / elapsed : null;
    const left = job.documents_total - finished;
    const eta = rate ? left / rate : null;
    const open = OPEN.has(job.status);
    clear(
      panel,
      h("h2", {}, "Job ", h("code", {}, jobId.slice(0, 8)), " ", badge(job.status)),
      h("progress", { max: 1, value: job.progress, "aria-label": "Job progress" }),
      h(
        "p",
        { class: "job-summary" },
        `${finished} of ${job.documents_total} documents finished — `,
        h("strong", { class: "done-count" }, `${job.documents_done} indexed`),
        ", ",
        h("strong", { class: "failed-count" }, `${job.documents_failed} failed`),
        ` · ${job.chunks_embedded} chunks embedded`,
        open ? ` · ${rate === null ? "measuring rate…" : `${rate.toFixed(2)} docs/s`} · ETA ${fmt.duration(eta)}` : "",
      ),
      counters(job),
      stageTimes(job),
      job.error ? notice("error", job.error) : null,
      documentsTable(docs.items),
      h(
        "div",
        { class: "actions" },
        open ? action("Cancel job", `/v1/jobs/${jobId}/cancel`, "danger") : null,
        !open && job.documents_failed ? action("Requeue failed", `/v1/jobs/${jobId}/requeue`, "secondary") : null,
        h("a", { href: `#/documents?collection=${job.collection_id}` }, "Open documents"),
      ),
    );
    if (open && !stopped) timer = setTimeout(refresh, POLL_MS);
  };
  await refresh();
  return panel;
}
