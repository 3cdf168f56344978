// Metrics dashboard: the server's sampled history (GET /v1/metrics/history) plotted with uPlot,
// refreshed every few seconds.

import { api } from "../api.js";
import { clear, errorText, h, notice, pageHeader } from "../dom.js";

const uPlot = window.uPlot;
const COLORS = ["#2563eb", "#dc2626", "#059669", "#d97706"];

const CHARTS = [
  { id: "requests", title: "Requests", unit: "req/s", series: [["requests_per_s", "requests/s"]] },
  { id: "ttft", title: "Time to first token", unit: "ms", series: [["ttft_p50_ms", "p50"], ["ttft_p99_ms", "p99"]] },
  { id: "tpot", title: "Time per output token", unit: "ms", series: [["tpot_p50_ms", "p50"], ["tpot_p99_ms", "p99"]] },
  { id: "goodput", title: "Goodput", unit: "%", scale: 100, series: [["goodput", "meeting every SLO"]] },
  { id: "tokens", title: "Output tokens", unit: "tok/s", series: [["output_tokens_per_s", "tokens/s"]] },
  { id: "prefix", title: "Prefix-cache hit rate", unit: "%", scale: 100, series: [["prefix_cache_hit_rate", "hit rate"]] },
  { id: "kv", title: "KV-cache usage", unit: "%", scale: 100, series: [["kv_cache_usage", "used"]] },
  { id: "queue", title: "Queue depth", unit: "", series: [["engine_queue", "engine waiting"], ["ingestion_queue", "documents in ingestion"]] },
  { id: "ingest", title: "Ingestion throughput", unit: "/s", series: [["chunks_per_s", "chunks/s"], ["documents_per_s", "documents/s"]] },
];

function columns(samples, chart) {
  const scale = chart.scale ?? 1;
  return [samples.map((s) => s.t), ...chart.series.map(([key]) => samples.map((s) => (s[key] === null || s[key] === undefined ? null : s[key] * scale)))];
}

function latest(samples, chart) {
  const scale = chart.scale ?? 1;
  return chart.series
    .map(([key, label]) => {
      const last = [...samples].reverse().find((s) => s[key] !== null && s[key] !== undefined);
      return `${label}: ${last ? +(last[key] * scale).toFixed(2) : "—"}${chart.unit && last ? ` ${chart.unit}` : ""}`;
    })
    .join(" · ");
}

function makePlot(chart, el, width) {
  return new uPlot(
    {
      width,
      height: 180,
      legend: { show: true, live: false },
      cursor: { drag: { x: false, y: false } },
      // From zero; fractions on 0-100 %; an all-zero or empty series still gets a readable axis.
      scales: { x: { time: true }, y: { range: (u, min, max) => [0, chart.scale ? 100 : max > 0 ? max * 1.15 : 1] } },
      axes: [{}, { label: chart.unit, size: 56 }],
      series: [{}, ...chart.series.map(([, label], i) => ({ label, stroke: COLORS[i], width: 2, points: { size: 4 }, spanGaps: false }))],
    },
    [[], ...chart.series.map(() => [])],
    el,
  );
}

export async function render(root, ctx) {
  if (!uPlot) {
    root.append(pageHeader("Metrics"), notice("error", "The charting library did not load."));
    return;
  }
  const status = h("p", { class: "muted", "aria-live": "polite" });
  const grid = h("div", { class: "charts" });
  const cards = CHARTS.map((chart) => {
    const plotEl = h("div", { class: "plot" });
    const now = h("p", { class: "now" });
    const card = h("section", { class: "chart card", id: `chart-${chart.id}`, "aria-label": chart.title, dataset: { points: "0" } }, h("h2", {}, chart.title), now, plotEl);
    grid.append(card);
    return { chart, card, plotEl, now, plot: null };
  });
  root.append(pageHeader("Metrics"), h("p", { class: "muted" }, "Sampled by the API server every few seconds and kept in memory (the last half hour). Gaps mean no data: no answers in the last minute, or no local engine."), status, grid);

  let samples = [];
  let timer;
  const widthOf = (el) => Math.max(240, el.clientWidth - 8);
  const draw = () => {
    for (const c of cards) {
      if (!c.plot && c.plotEl.isConnected) c.plot = makePlot(c.chart, c.plotEl, widthOf(c.plotEl));
      const data = columns(samples, c.chart);
      c.plot?.setData(data);
      c.now.textContent = latest(samples, c.chart);
      c.card.dataset.points = String(data.slice(1).reduce((n, ys) => n + ys.filter((y) => y !== null).length, 0));
    }
  };
  const poll = async () => {
    try {
      const history = await api(`/v1/metrics/history?since=${samples.at(-1)?.t ?? 0}`);
      samples = [...samples, ...history.samples].slice(-900);
      status.textContent = samples.length ? `${samples.length} samples, every ${history.interval_s} s; updated ${new Date().toLocaleTimeString()}` : "No samples yet.";
      draw();
    } catch (err) {
      clear(status, notice("error", errorText(err)));
    }
    timer = setTimeout(poll, 2000);
  };
  const resize = () => cards.forEach((c) => c.plot?.setSize({ width: widthOf(c.plotEl), height: 180 }));
  window.addEventListener("resize", resize);
  ctx.onCleanup(() => {
    clearTimeout(timer);
    window.removeEventListener("resize", resize);
    cards.forEach((c) => c.plot?.destroy());
  });
  // The cards are attached by the shell after render returns; draw once they are in the page.
  requestAnimationFrame(() => poll());
}
