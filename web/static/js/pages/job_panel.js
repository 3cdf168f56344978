// One ingestion job, live: progress, per-stage counters, rate and ETA, each document's status and
// failure reason, cancel and requeue. Polls the job while it is open.

import { api } from "../api.js";
import { badge, clear, errorText, fmt, h, notice } from "../dom.js";

const STAGES = ["queued", "parsing", "chunking", "embedding", "indexed", "failed"];
const OPEN = new Set(["queued", "running"]);
const POLL_MS = 700;
const QUEUE_EVERY_MS = 3000;
// How far a document in each stage is, for a bar that moves before whole documents finish (a lone
// large document would otherwise show an empty bar until its very end).
const STAGE_WEIGHT = { queued: 0, parsing: 0.1, chunking: 0.25, embedding: 0.3 };

/** The job's status as people read it: a "succeeded" job with failed documents is not all green. */
export function jobBadge(job) {
  if (job.status === "succeeded" && job.documents_failed) {
    return h("span", { class: "badge badge-partial", dataset: { partial: "true" } }, `completed with ${job.documents_failed} failure${job.documents_failed > 1 ? "s" : ""}`);
  }
  return badge(job.status === "succeeded" ? "completed" : job.status);
}

/** When the job started: its first document's claim by a worker (not when it was queued). */
export const startedAt = (job) => job.stages?.started_at ?? null;

/** Chunks of the groups embedding now: [sent to the model, to send] (ingestion/state.py note_embedding). */
const embedding = (job) => [job.stages.embedding_sent ?? 0, job.stages.embedding_planned ?? 0];

/** Chunks embedded so far, those of documents still embedding included. */
export const chunksEmbedded = (job) => job.chunks_embedded + embedding(job)[0];

function weight(job, status) {
  const [sent, planned] = embedding(job);
  // An embedding document moves from its base weight to almost done as its chunks are embedded.
  if (status === "embedding" && planned) return STAGE_WEIGHT.embedding + (0.95 - STAGE_WEIGHT.embedding) * (sent / planned);
  return STAGE_WEIGHT[status] ?? 0;
}

function stagedProgress(job) {
  const partial = Object.entries(job.documents_by_status).reduce((n, [s, count]) => n + weight(job, s) * count, 0);
  const finished = job.documents_done + job.documents_failed;
  return job.documents_total ? (finished + partial) / job.documents_total : 1;
}

function counters(job) {
  // Statuses beyond the usual stages (e.g. indexed_with_warnings) get their own counter.
  const stages = [...STAGES, ...Object.keys(job.documents_by_status).filter((s) => !STAGES.includes(s))];
  return h(
    "dl",
    { class: "counters" },
    stages.map((s) => h("div", { class: `counter counter-${s}` }, h("dt", {}, s.replaceAll("_", " ")), h("dd", { "data-stage": s }, job.documents_by_status[s] ?? 0))),
  );
}

/** Why a queued job waits: what else holds the workers (this tenant's running jobs, and jobs and
 * evaluation runs queued before it); the workers take them in order. */
async function queueNote(job) {
  const [running, queued, evals] = await Promise.all([
    api("/v1/jobs?status=running&limit=100"),
    api("/v1/jobs?status=queued&limit=100"),
    api("/v1/evals").catch(() => []),
  ]);
  const ahead = queued.filter((j) => j.id !== job.id && j.created_at < job.created_at).length;
  const busyEvals = evals.filter((r) => r.status === "running" || (r.status === "queued" && r.created_at < job.created_at)).length;
  const parts = [];
  if (running.length) parts.push(`${running.length} running job${running.length > 1 ? "s" : ""}`);
  if (ahead) parts.push(`${ahead} job${ahead > 1 ? "s" : ""} queued before it`);
  if (busyEvals) parts.push(`${busyEvals} evaluation run${busyEvals > 1 ? "s" : ""}`);
  const position = ahead + running.length + busyEvals;
  return h(
    "p",
    { class: "notice notice-info queue-note", role: "status", dataset: { ahead: position } },
    parts.length
      ? `Waiting for a worker: ${parts.join(", ")} ${position > 1 ? "are" : "is"} ahead of this job (the workers share them; queue position ${position + 1}).`
      : "Waiting for a worker to pick the job up: none has yet (is a worker running?).",
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
            h("td", { class: "reason" }, d.error ?? "", d.retryable === false ? h("span", { class: "muted" }, " — permanent") : d.retryable ? h("span", { class: "muted" }, " — retryable") : null),
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

  let queue = null;
  let queueAt = 0;
  const requeueRetryable = (docs) =>
    h(
      "button",
      {
        type: "button",
        class: "secondary",
        onclick: async (e) => {
          e.target.disabled = true;
          try {
            for (const d of docs) await api(`/v1/documents/${d.id}/requeue`, { method: "POST" });
            seen.length = 0;
            stopped = false;
            await refresh();
          } catch (err) {
            panel.append(notice("error", errorText(err)));
          }
        },
      },
      `Retry ${docs.length} retryable`,
    );

  const refresh = async () => {
    clearTimeout(timer);
    let job, docs;
    try {
      job = await api(`/v1/jobs/${jobId}`);
      docs = await api(`/v1/collections/${job.collection_id}/documents?job_id=${jobId}&limit=1000`);
      if (job.status !== "queued") queue = null;
      else if (!queue || performance.now() - queueAt > QUEUE_EVERY_MS) {
        queue = await queueNote(job);
        queueAt = performance.now();
      }
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
    const failed = docs.items.filter((d) => d.status === "failed");
    const retryable = failed.filter((d) => d.retryable !== false);
    clear(
      panel,
      h("h2", {}, "Job ", h("code", {}, jobId.slice(0, 8)), " ", jobBadge(job)),
      h("progress", { max: 1, value: stagedProgress(job), "aria-label": "Job progress" }),
      queue,
      h("p", { class: "muted" }, `Queued ${fmt.time(job.created_at)} · started ${startedAt(job) ? fmt.time(startedAt(job)) : "not yet"}`),
      h(
        "p",
        { class: "job-summary" },
        `${finished} of ${job.documents_total} documents finished — `,
        h("strong", { class: "done-count" }, `${job.documents_done} indexed`),
        ", ",
        h("strong", { class: "failed-count" }, `${job.documents_failed} failed`),
        " · ",
        h("span", { class: "chunks-count" }, `${chunksEmbedded(job)} chunks embedded`),
        open && embedding(job)[1] ? h("span", { class: "embedding-live" }, ` (embedding now: ${embedding(job)[0]} of ${embedding(job)[1]} chunks)`) : "",
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
        // Only what may succeed is offered again: a corrupt or unsupported file fails the same way.
        !open && retryable.length ? requeueRetryable(retryable) : null,
        !open && failed.length > retryable.length ? h("span", { class: "muted", id: "permanent-note" }, `${failed.length - retryable.length} failure${failed.length - retryable.length > 1 ? "s are" : " is"} permanent (the file itself): upload a fixed file instead.`) : null,
        h("a", { href: `#/documents?collection=${job.collection_id}` }, "Open documents"),
      ),
    );
    if (open && !stopped) timer = setTimeout(refresh, POLL_MS);
  };
  await refresh();
  return panel;
}
