// One evaluation run: progress while it works (polled), then its metrics per variant, a sweep's
// quality-vs-latency table and plot, and a comparison with another run of the same kind.

import { api } from "../api.js";
import { badge, clear, errorText, fmt, h, notice, pageHeader, poller } from "../dom.js";
import { applySection, bestVariant, itemsSection, sweepChart, variantLabels, variantSelect } from "./eval_parts.js";
import { ACTIVE, MAIN_METRIC, progressCell, progressText } from "./evals.js";

// Columns after the quality metrics, in this order (evals/metrics.py latency_summary, runner.aggregate).
const COST = ["latency_ms_p50", "latency_ms_p99", "tokens_mean", "tokens_total", "items"];
const LABELS = { latency_ms_p50: "p50 latency", latency_ms_p99: "p99 latency", tokens_mean: "tokens / item", tokens_total: "tokens", items: "items" };
// Lower is better for these: a negative delta is an improvement.
const LOWER_BETTER = new Set(["latency_ms_p50", "latency_ms_p99", "tokens_mean", "tokens_total"]);

function table(id, caption, head, rows) {
  return h(
    "div",
    { class: "table-wrap" },
    h("table", { id }, caption ? h("caption", {}, caption) : null, h("thead", {}, h("tr", {}, head.map((t) => h("th", { scope: "col" }, LABELS[t] ?? t)))), h("tbody", {}, rows)),
  );
}

function value(name, v) {
  if (v === undefined || v === null) return "—";
  if (name.startsWith("latency")) return fmt.ms(v);
  if (name === "tokens_mean") return fmt.num(v, 1);
  return COST.includes(name) ? fmt.num(v) : fmt.score(v);
}

/** Quality metrics with the kind's main one first, then latency and tokens. */
function ordered(names, main) {
  const quality = names.filter((n) => !COST.includes(n)).sort((a, b) => (a === main ? -1 : b === main ? 1 : a.localeCompare(b)));
  return [...quality, ...COST.filter((n) => names.includes(n))];
}

/** {"mode": "hybrid", "hybrid": {"alpha": 0.5}} -> "mode=hybrid · hybrid.alpha=0.5" */
function overridesText(obj, prefix = "") {
  const parts = Object.entries(obj ?? {}).map(([k, v]) => (v && typeof v === "object" && !Array.isArray(v) ? overridesText(v, `${prefix}${k}.`) : `${prefix}${k}=${JSON.stringify(v).replace(/^"|"$/g, "")}`));
  return parts.filter(Boolean).join(" · ");
}

const bestBadge = (label, best) => (label === best ? h("span", { class: "badge badge-succeeded best" }, "best") : null);

/** Mean metrics per variant. */
function metricsTable(run) {
  const variants = run.metrics?.variants ?? {};
  const labels = (run.config?.variants ?? []).map((v) => v.label).filter((l) => l in variants);
  for (const l of Object.keys(variants)) if (!labels.includes(l)) labels.push(l);
  if (!labels.length) return h("p", { class: "empty" }, ACTIVE.includes(run.status) ? "Metrics appear when the run finishes." : "No metrics.");
  const main = MAIN_METRIC[run.kind];
  // Retrieval runs spend no tokens: their token columns would be all zeros.
  const names = [...new Set(labels.flatMap((l) => Object.keys(variants[l])))].filter((n) => !n.startsWith("tokens") || labels.some((l) => variants[l][n]));
  const cols = ordered(names, main);
  return table(
    "eval-metrics",
    null,
    ["Variant", ...cols],
    labels.map((l) =>
      h(
        "tr",
        { dataset: { variant: l } },
        h("th", { scope: "row", class: "nowrap" }, l, bestBadge(l, run.metrics.sweep?.best)),
        cols.map((n) => h("td", { class: `num${n === main ? " main" : ""}` }, value(n, variants[l][n]))),
      ),
    ),
  );
}

async function sweepSection(run, ctx) {
  const sweep = await api(`/v1/evals/${run.id}/sweep`);
  // NOTE: an <img src> cannot send the API key; the plot is fetched like any call and shown from a
  // blob URL, in place of a placeholder so that no broken image shows while it loads.
  const img = h("p", { class: "muted sweep-plot" }, "Loading the plot…");
  api(`/v1/evals/${run.id}/sweep/plot?format=svg`, { as: "blob" })
    .then((blob) => {
      const url = URL.createObjectURL(blob);
      ctx.onCleanup(() => URL.revokeObjectURL(url));
      img.replaceWith(h("img", { class: "sweep-plot", src: url, alt: `${sweep.metric} against p50 latency per setting, Pareto front joined` }));
    })
    .catch((err) => img.replaceWith(notice("error", `Plot: ${errorText(err)}`)));
  const rows = sweep.rows.map((r) =>
    h(
      "tr",
      { dataset: { variant: r.label } },
      h("th", { scope: "row", class: "nowrap" }, r.label, bestBadge(r.label, sweep.best)),
      h("td", {}, h("code", {}, overridesText(r.overrides) || "(defaults)")),
      h("td", { class: "num" }, fmt.score(r[sweep.metric])),
      h("td", { class: "num" }, fmt.ms(r.latency_ms_p50)),
      h("td", { class: "num" }, fmt.ms(r.latency_ms_p99)),
      h("td", {}, r.pareto ? "yes" : ""),
    ),
  );
  return h(
    "section",
    { class: "card", "aria-label": "Sweep" },
    h("h2", {}, "Sweep: quality against latency"),
    table("eval-sweep", null, ["Setting", "Retrieval overrides", sweep.metric, "p50 latency", "p99 latency", "Pareto front"], rows),
    sweepChart(sweep),
    img,
  );
}

const sameDataset = (a, b) => a.dataset?.path === b.dataset?.path && (a.dataset?.split ?? "test") === (b.dataset?.split ?? "test") && a.dataset?.format === b.dataset?.format;

/** Compare a variant of this run with a variant of another run on the same dataset: runs on other
 * datasets share no items, so they are listed but cannot be picked. */
async function compareSection(run) {
  const all = (await api(`/v1/evals?kind=${encodeURIComponent(run.kind)}&status=succeeded&limit=100`)).filter((r) => r.id !== run.id);
  if (!all.length) return null;
  const comparable = all.filter((r) => sameDataset(r, run));
  const out = h("div", { "aria-live": "polite" });
  const mineSelect = variantSelect("compare-mine", variantLabels(run), bestVariant(run), () => show());
  const theirs = h("span", {});
  let otherVariant = null;
  const select = h(
    "select",
    { id: "compare-with", onchange: () => pickOther() },
    h("option", { value: "" }, "choose a run"),
    all.map((r) => h("option", { value: r.id, disabled: !sameDataset(r, run) }, `${r.name || r.id.slice(0, 8)} · ${fmt.time(r.created_at)}${sameDataset(r, run) ? "" : ` — other dataset (${r.dataset?.path ?? "?"}), not comparable`}`)),
  );
  function pickOther() {
    const other = all.find((r) => r.id === select.value);
    otherVariant = other ? variantSelect("compare-theirs", variantLabels(other), bestVariant(other), () => show()) : null;
    clear(theirs, otherVariant ? h("div", { class: "field inline" }, h("label", { for: "compare-theirs" }, "Its variant"), otherVariant) : null);
    show();
  }
  async function show() {
    const other = select.value;
    if (!other) return clear(out);
    try {
      const q = new URLSearchParams({ variant: mineSelect.value, other_variant: otherVariant?.value ?? "" });
      const c = await api(`/v1/evals/${run.id}/compare/${other}?${q}`);
      const mine = run.metrics.variants?.[c.a.variant] ?? {};
      const t = c.test ?? {};
      clear(
        out,
        h("p", {}, `On ${c.metric} over ${t.n} shared items the other run wins ${c.wins}, loses ${c.losses}, ties ${c.ties}; mean delta ${fmt.score(t.mean_delta)}, bootstrap p ${fmt.score(t.bootstrap_p)}, t-test p ${fmt.score(t.t_test_p)}.`),
        table(
          "eval-compare",
          `This run (${c.a.variant}) against the other (${c.b.variant}); delta = other − this`,
          ["Metric", "This", "Other", "Delta"],
          ordered(Object.keys(c.deltas), c.metric).map((name) => {
            const d = c.deltas[name];
            // Green where the other run is better: higher quality, lower latency and tokens.
            const better = name === "items" || d === 0 ? "" : (d > 0) !== LOWER_BETTER.has(name) ? "up" : "down";
            return h("tr", {}, h("th", { scope: "row" }, LABELS[name] ?? name), h("td", { class: "num" }, value(name, mine[name])), h("td", { class: "num" }, value(name, mine[name] + d)), h("td", { class: `num ${better}` }, `${d > 0 ? "+" : ""}${value(name, d)}`));
          }),
        ),
      );
    } catch (err) {
      clear(out, notice("error", errorText(err)));
    }
  }
  return h(
    "section",
    { class: "card", "aria-label": "Compare" },
    h("h2", {}, "Compare"),
    h(
      "div",
      { class: "toolbar" },
      h("div", { class: "field inline" }, h("label", { for: "compare-mine" }, "This run's variant"), mineSelect),
      h("div", { class: "field inline" }, h("label", { for: "compare-with" }, "Compare with"), select),
      theirs,
    ),
    comparable.length < all.length ? h("p", { class: "muted" }, `${all.length - comparable.length} run(s) evaluated another dataset: they share no items with this one.`) : null,
    out,
  );
}

function summary(run) {
  const items = [
    ["Status", badge(run.status)],
    ["Kind", run.kind],
    ["Stage", run.progress?.stage ?? "—"],
    ["Dataset", run.dataset?.path ? `${run.dataset.path}${run.dataset.split ? ` (${run.dataset.split})` : ""}` : "—"],
    ["Attempts", run.attempts],
    ["Created", fmt.time(run.created_at)],
    ["Updated", fmt.time(run.updated_at)],
  ];
  return h("dl", { class: "facts", id: "eval-summary" }, items.map(([k, v]) => h("div", {}, h("dt", {}, k), h("dd", {}, v))));
}

export async function render(root, ctx) {
  const id = ctx.args[0];
  const body = h("div", { class: "run" });
  const status = h("div", { "aria-live": "polite" });
  const title = h("h1", {});
  const headActions = h("div", { class: "head-actions" });
  const schedule = poller(ctx);

  async function cancel(button) {
    button.disabled = true;
    try {
      await draw(await api(`/v1/evals/${id}/cancel`, { method: "POST" }));
    } catch (err) {
      clear(status, notice("error", errorText(err)));
      button.disabled = false;
    }
  }

  async function draw(run) {
    const active = ACTIVE.includes(run.status);
    title.textContent = `Evaluation ${run.name || id.slice(0, 8)}`;
    clear(headActions, active ? h("button", { type: "button", class: "danger", onclick: (e) => cancel(e.currentTarget) }, "Cancel run") : null);
    const parts = [
      summary(run),
      active ? h("div", { class: "card eval-progress" }, h("p", {}, progressText(run)), progressCell(run)) : null,
      run.error && run.status !== "cancelled" ? notice("error", run.error) : null,
      h("section", { class: "card", "aria-label": "Metrics" }, h("h2", {}, "Metrics per variant"), metricsTable(run)),
    ];
    // Sweep and comparison only make sense once the run is done; they are fetched once then.
    if (!active && run.metrics?.sweep) parts.push(await sweepSection(run, ctx).catch((err) => notice("error", errorText(err))));
    if (run.status === "succeeded") {
      parts.push(itemsSection(run, MAIN_METRIC[run.kind]));
      parts.push(await compareSection(run).catch((err) => notice("error", errorText(err))));
      parts.push(await applySection(run).catch((err) => notice("error", errorText(err))));
    }
    clear(body, parts);
    schedule(active ? poll : null, 2000);
  }

  async function poll() {
    try {
      await draw(await api(`/v1/evals/${id}`));
    } catch (err) {
      clear(status, notice("error", errorText(err)));
      schedule(poll, 4000);
    }
  }

  await draw(await api(`/v1/evals/${id}`));
  root.append(h("div", { class: "page-head" }, title, headActions), h("p", {}, h("a", { href: "#/evals" }, "← all evaluations")), status, body);
}
