// Search playground: mode, k, filters, rerank; the BM25, dense, fused and reranked rankings side by
// side with their scores, and each stage's latency.

import { api } from "../api.js";
import { clear, collectionPicker, errorText, fmt, h, notice, pageHeader } from "../dom.js";

const field = (id, label, control, hint) => h("div", { class: "field" }, h("label", { for: id }, label), control, hint ? h("small", {}, hint) : null);

function spanLink(item) {
  return `#/document/${item.document_id}?chunk=${item.chunk_id}&start=${item.char_start}&end=${item.char_end}`;
}

function column(title, ranking, labels, note) {
  const items = ranking ?? [];
  return h(
    "section",
    { class: "ranking card", "aria-label": `${title} ranking`, dataset: { stage: title.toLowerCase() } },
    h("h3", {}, title),
    note ? h("p", { class: "muted" }, note) : null,
    items.length
      ? h(
          "ol",
          {},
          items.map((r, i) => {
            const label = labels[r.chunk_id] ?? {};
            return h(
              "li",
              { dataset: { chunk: r.chunk_id } },
              h("span", { class: "rank" }, i + 1),
              h("span", { class: "score", title: "score" }, fmt.score(r.score)),
              h(
                "div",
                { class: "hit" },
                h("a", { href: spanLink({ ...label, chunk_id: r.chunk_id }) }, label.source_id ?? r.chunk_id.slice(0, 8), label.page ? ` p.${label.page}` : ""),
                h("div", { class: "snippet" }, label.snippet ?? ""),
              ),
            );
          }),
        )
      : h("p", { class: "empty" }, note ? "" : "no results"),
  );
}

function timings(t) {
  const stages = ["bm25", "embed", "dense", "rerank", "total"].filter((s) => s in t);
  return h("dl", { class: "timings", "aria-label": "Latency per stage" }, stages.map((s) => h("div", {}, h("dt", {}, s), h("dd", {}, fmt.ms(t[s])))));
}

function resultsView(data, k) {
  const debug = data.debug;
  const labels = { ...debug.chunks };
  for (const r of data.results) labels[r.chunk_id] ??= { ...r, snippet: r.text.slice(0, 160) };
  const rankings = debug.rankings;
  const cut = (r) => (r ? r.slice(0, k) : r);
  const columns = [];
  for (const [name, ranking] of Object.entries(rankings)) columns.push(column(name.startsWith("bm25") ? name.replace("bm25", "BM25") : name.replace("dense", "Dense"), cut(ranking), labels));
  columns.push(column("Fused", Object.keys(rankings).length > 1 ? debug.fused : null, labels, Object.keys(rankings).length > 1 ? null : "one retriever: nothing to fuse"));
  columns.push(column("Reranked", debug.reranked, labels, debug.reranked ? null : `rerank: ${debug.rerank}`));
  const grid = h("div", { class: "rankings", id: "rankings" }, columns);
  // Hovering or focusing a hit lights up the same chunk in every column.
  const light = (chunk) => grid.querySelectorAll("li").forEach((li) => li.classList.toggle("same", !!chunk && li.dataset.chunk === chunk));
  grid.addEventListener("mouseover", (e) => light(e.target.closest("li")?.dataset.chunk));
  grid.addEventListener("focusin", (e) => light(e.target.closest("li")?.dataset.chunk));
  grid.addEventListener("mouseleave", () => light(null));
  return h(
    "div",
    {},
    h("h2", {}, `${data.results.length} results`),
    timings(debug.timings_ms),
    debug.queries ? h("p", { class: "muted" }, "Queries: ", debug.queries.join(" · ")) : null,
    grid,
    h(
      "section",
      { "aria-label": "Results", class: "results" },
      h("h2", {}, "Final results"),
      h(
        "ol",
        {},
        data.results.map((r) =>
          h(
            "li",
            { class: "card" },
            h("a", { href: spanLink(r) }, r.source_id, r.page ? ` · page ${r.page}` : "", ` · chars ${r.char_start}–${r.char_end}`),
            h("p", { class: "muted" }, Object.entries(r.scores).map(([s, v]) => `${s} ${fmt.score(v)}${r.ranks[s] ? ` (#${r.ranks[s]})` : ""}`).join(" · ")),
            h("p", { class: "result-text" }, r.text),
          ),
        ),
      ),
    ),
  );
}

export async function render(root, ctx) {
  const picker = await collectionPicker(ctx.query.get("collection"), (c) => (collection = c));
  let collection = picker.collection;
  // A cross-encoder without a configured model is skipped by the server: not offered then.
  const crossOk = (await api("/v1/retrieval/defaults")).rerankers.includes("cross-encoder");
  const out = h("div", { "aria-live": "polite" });
  const form = h(
    "form",
    { class: "card search-form", role: "search" },
    h("div", { class: "toolbar" }, picker.el),
    field("q", "Query", h("input", { id: "q", name: "query", type: "search", required: true, value: ctx.query.get("q") ?? "" })),
    h(
      "div",
      { class: "grid" },
      field("mode", "Mode", h("select", { id: "mode", name: "mode" }, ["hybrid", "bm25", "dense"].map((m) => h("option", { value: m }, m)))),
      field("k", "k (results)", h("input", { id: "k", name: "k", type: "number", min: 1, max: 100, value: "5" })),
      field(
        "rerank",
        "Rerank",
        h(
          "select",
          { id: "rerank", name: "rerank" },
          h("option", { value: "off" }, "off"),
          h("option", { value: "cross-encoder", disabled: !crossOk }, crossOk ? "cross-encoder" : "cross-encoder (no model on this server)"),
          h("option", { value: "llm" }, "LLM judge"),
        ),
      ),
      field("sources", "Only sources", h("input", { id: "sources", name: "sources", placeholder: "a.pdf, b.md" }), "comma-separated source ids"),
      field("meta", "Metadata filter", h("input", { id: "meta", name: "meta", placeholder: '{"lang": "en"}' }), "JSON object"),
      field("after", "Created after", h("input", { id: "after", name: "after", type: "date" })),
    ),
    h("div", { class: "actions" }, h("button", { type: "submit", class: "primary" }, "Search")),
  );
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const f = form.elements;
    const k = Number(f.k.value) || 5;
    const body = { query: f.query.value, mode: f.mode.value, top_k: k, debug: true, filters: {} };
    if (f.rerank.value !== "off") {
      body.rerank = true;
      body.options = { rerank: { kind: f.rerank.value, candidates: Math.max(k, 10) } };
    } else body.rerank = false;
    if (f.sources.value.trim()) body.filters.source_ids = f.sources.value.split(",").map((s) => s.trim()).filter(Boolean);
    if (f.after.value) body.filters.created_after = new Date(f.after.value).toISOString();
    try {
      if (f.meta.value.trim()) body.filters.metadata = JSON.parse(f.meta.value);
    } catch (err) {
      clear(out, notice("error", `Metadata filter is not valid JSON: ${err.message}`));
      return;
    }
    clear(out, h("p", { class: "loading" }, "Searching…"));
    try {
      const data = await api(`/v1/collections/${collection.id}/search`, { method: "POST", json: body });
      clear(out, resultsView(data, k));
    } catch (err) {
      clear(out, notice("error", errorText(err)));
    }
  });
  root.append(pageHeader("Search playground"), form, out);
}
