// Parts of one evaluation run's page that act on it: the per-item table ("which queries got
// worse"), apply a variant to a collection (confirmed), and the interactive sweep plot (uPlot).

import { api, listCollections } from "../api.js";
import { clear, confirmDialog, errorText, fmt, h, notice } from "../dom.js";

/** The run's variant labels, in the order it ran them. */
export const variantLabels = (run) => {
  const labels = (run.config?.variants ?? []).map((v) => v.label);
  for (const l of Object.keys(run.metrics?.variants ?? {})) if (!labels.includes(l)) labels.push(l);
  return labels;
};

/** The variant people mean by "this run": a sweep's best, else its only one. */
export const bestVariant = (run) => run.metrics?.sweep?.best ?? variantLabels(run)[0];

export function variantSelect(id, labels, chosen, onchange) {
  return h("select", { id, onchange }, labels.map((l) => h("option", { value: l, selected: l === chosen }, l)));
}

const FILTERS = [
  ["all", "all items"],
  ["worse", "worse than the baseline"],
  ["better", "better than the baseline"],
  ["same", "unchanged"],
];

/** Per-item results of one variant against a baseline variant, on the kind's main metric. */
export function itemsSection(run, main) {
  const labels = variantLabels(run);
  if (!labels.length) return null;
  const out = h("div", { "aria-live": "polite" });
  const variant = variantSelect("items-variant", labels, bestVariant(run), () => load());
  const baseline = variantSelect("items-baseline", labels, labels.find((l) => l !== bestVariant(run)) ?? labels[0], () => load());
  const filter = h("select", { id: "items-filter", onchange: () => draw() }, FILTERS.map(([v, t]) => h("option", { value: v }, t)));
  const find = h("input", { id: "items-find", type: "search", placeholder: "query text", oninput: () => draw() });
  let rows = [];
  let latest = 0; // only the newest load draws: a slower earlier one must not overwrite its pick

  async function load() {
    const mark = ++latest;
    try {
      const get = (v) => api(`/v1/evals/${run.id}/items?variant=${encodeURIComponent(v)}&limit=1000`);
      const [mine, base] = await Promise.all([get(variant.value), get(baseline.value)]);
      if (mark !== latest) return;
      const byKey = new Map(base.map((i) => [i.item_key, i]));
      rows = mine.map((i) => {
        const a = i.metrics?.[main];
        const b = byKey.get(i.item_key)?.metrics?.[main];
        return { item: i, value: a, base: b, delta: a !== undefined && b !== undefined ? a - b : null };
      });
      draw();
    } catch (err) {
      if (mark === latest) clear(out, notice("error", errorText(err)));
    }
  }

  function draw() {
    const q = find.value.trim().toLowerCase();
    const keep = (r) =>
      (filter.value === "all" || (filter.value === "worse" && r.delta < 0) || (filter.value === "better" && r.delta > 0) || (filter.value === "same" && r.delta === 0)) &&
      (!q || String(r.item.query ?? "").toLowerCase().includes(q));
    const shown = rows.filter(keep).sort((x, y) => (x.delta ?? 0) - (y.delta ?? 0));
    clear(
      out,
      h("p", { class: "muted" }, `${shown.length} of ${rows.length} items`),
      shown.length
        ? h(
            "div",
            { class: "table-wrap" },
            h(
              "table",
              { id: "eval-items" },
              h("thead", {}, h("tr", {}, ["Item", "Query", `${main} (${variant.value})`, `baseline (${baseline.value})`, "Delta", "Latency"].map((t) => h("th", { scope: "col" }, t)))),
              h(
                "tbody",
                {},
                shown.slice(0, 300).map((r) =>
                  h(
                    "tr",
                    { dataset: { item: r.item.item_key, delta: r.delta ?? "" } },
                    h("th", { scope: "row" }, h("code", {}, r.item.item_key)),
                    h("td", { class: "run-input" }, r.item.query ?? ""),
                    h("td", { class: "num" }, fmt.score(r.value)),
                    h("td", { class: "num" }, fmt.score(r.base)),
                    h("td", { class: `num ${r.delta > 0 ? "up" : r.delta < 0 ? "down" : ""}` }, r.delta === null ? "—" : `${r.delta > 0 ? "+" : ""}${fmt.score(r.delta)}`),
                    h("td", { class: "num" }, fmt.ms(r.item.latency_ms)),
                  ),
                ),
              ),
            ),
          )
        : h("p", { class: "empty" }, "No item matches."),
    );
  }

  load();
  return h(
    "section",
    { class: "card", "aria-label": "Items" },
    h("h2", {}, "Items"),
    h(
      "div",
      { class: "toolbar" },
      h("div", { class: "field inline" }, h("label", { for: "items-variant" }, "Variant"), variant),
      h("div", { class: "field inline" }, h("label", { for: "items-baseline" }, "Baseline"), baseline),
      h("div", { class: "field inline" }, h("label", { for: "items-filter" }, "Show"), filter),
      h("div", { class: "field inline" }, h("label", { for: "items-find" }, "Find"), find),
    ),
    out,
  );
}

/** Apply a variant's retrieval overrides to a collection, after a confirmation that shows them. */
export async function applySection(run) {
  if (run.kind === "agent" || !variantLabels(run).length) return null;
  const collections = await listCollections();
  const labels = variantLabels(run);
  const variant = variantSelect("apply-variant", labels, bestVariant(run), null);
  const target = h(
    "select",
    { id: "apply-collection" },
    collections.map((c) => h("option", { value: c.id, selected: c.id === run.collection_id }, c.name)),
  );
  const status = h("div", { "aria-live": "polite" });
  const overrides = (label) => (run.config?.variants ?? []).find((v) => v.label === label)?.overrides ?? {};
  const button = h(
    "button",
    {
      type: "button",
      class: "primary",
      onclick: async () => {
        const name = target.selectedOptions[0]?.textContent ?? "?";
        const ok = await confirmDialog(
          `Apply “${variant.value}” to “${name}”?`,
          `Its retrieval settings ${JSON.stringify(overrides(variant.value))} are merged into the collection's: later searches and answers use them.`,
          "Apply",
        );
        if (!ok) return;
        try {
          const applied = await api(`/v1/evals/${run.id}/apply`, { method: "POST", json: { variant: variant.value, collection: target.value } });
          clear(status, notice("ok", `Applied “${applied.variant}” to “${name}”: retrieval is now ${JSON.stringify(applied.retrieval)}.`));
        } catch (err) {
          clear(status, notice("error", errorText(err)));
        }
      },
    },
    "Apply…",
  );
  if (!collections.length) return null;
  return h(
    "section",
    { class: "card", "aria-label": "Apply" },
    h("h2", {}, "Apply a variant"),
    h("div", { class: "toolbar" }, h("div", { class: "field inline" }, h("label", { for: "apply-variant" }, "Variant to apply"), variant), h("div", { class: "field inline" }, h("label", { for: "apply-collection" }, "To collection"), target), button),
    status,
  );
}

/** The sweep as an interactive scatter: quality against p50 latency, one point a variant; the
 * cursor names the variant under it. */
export function sweepChart(sweep) {
  const uPlot = window.uPlot;
  const rows = [...sweep.rows].sort((a, b) => a.latency_ms_p50 - b.latency_ms_p50);
  const el = h("div", { class: "plot", id: "sweep-chart", dataset: { points: rows.length } });
  const readout = h("p", { class: "muted", id: "sweep-readout", "aria-live": "polite" }, "Point at a variant.");
  if (!uPlot || !rows.length) return null;
  const name = (i) => (i === null || i === undefined ? "Point at a variant." : `${rows[i].label}: ${sweep.metric} ${fmt.score(rows[i][sweep.metric])} at ${fmt.ms(rows[i].latency_ms_p50)} p50${rows[i].pareto ? " (Pareto front)" : ""}`);
  requestAnimationFrame(() => {
    // NOTE: the section may not be in the page yet: size from the content area, which always is.
    const width = Math.max(260, Math.min(900, (el.clientWidth || document.getElementById("view").clientWidth - 110)));
    const pad = (min, max) => [min - (max - min || 1) * 0.12, max + (max - min || 1) * 0.12];
    new uPlot(
      {
        width,
        height: 240,
        legend: { show: false },
        cursor: { drag: { x: false, y: false }, points: { size: 10 } },
        scales: { x: { time: false, range: (u, min, max) => pad(min, max) }, y: { range: (u, min, max) => pad(min, max) } },
        axes: [{ label: "p50 latency (ms)" }, { label: sweep.metric, size: 56 }],
        series: [{}, { label: sweep.metric, stroke: "#2563eb", width: 0, paths: () => null, points: { show: true, size: 9, fill: "#2563eb" } }],
        hooks: { setCursor: [(u) => (readout.textContent = name(u.cursor.idx))] },
      },
      [rows.map((r) => r.latency_ms_p50), rows.map((r) => r[sweep.metric])],
      el,
    );
  });
  return [el, readout];
}
