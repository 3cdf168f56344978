// One document: its parsed text with chunk boundaries drawn in, each chunk's span, page and token
// count; `?start=&end=` (from a citation or a search hit) marks a span and scrolls to it.

import { api } from "../api.js";
import { add, badge, fmt, h, pageHeader } from "../dom.js";

/** Cut the text at every chunk boundary (and the marked span's ends) into segments. */
function segments(text, chunks, mark) {
  const cuts = new Set([0, text.length]);
  for (const c of chunks) cuts.add(c.char_start).add(c.char_end);
  if (mark) cuts.add(mark.start).add(mark.end);
  const points = [...cuts].filter((p) => p >= 0 && p <= text.length).sort((a, b) => a - b);
  const out = [];
  for (let i = 0; i + 1 < points.length; i++) {
    const [a, b] = [points[i], points[i + 1]];
    const covering = chunks.filter((c) => c.char_start <= a && c.char_end >= b);
    out.push({ a, b, covering, marked: !!mark && a >= mark.start && b <= mark.end });
  }
  return out;
}

function textView(text, chunks, mark, focusChunk) {
  const body = h("div", { class: "doc-text", id: "doc-text" });
  let firstMarked = null;
  for (const seg of segments(text, chunks, mark)) {
    const starting = chunks.filter((c) => c.char_start === seg.a);
    for (const c of starting) {
      body.append(h("span", { class: "chunk-mark", id: `chunk-${c.ordinal}`, title: `chunk ${c.ordinal}: ${c.char_start}–${c.char_end}` }, `§${c.ordinal}`));
    }
    const ordinals = seg.covering.map((c) => c.ordinal);
    const cls = [
      "seg",
      ordinals.length ? `chunk-${ordinals[0] % 2 ? "odd" : "even"}` : "uncovered",
      ordinals.length > 1 ? "overlap" : "",
      focusChunk !== null && ordinals.includes(focusChunk) ? "focus" : "",
    ].join(" ");
    const piece = seg.marked ? h("mark", { class: `${cls} cited` }, text.slice(seg.a, seg.b)) : h("span", { class: cls }, text.slice(seg.a, seg.b));
    piece.dataset.chunks = ordinals.join(" ");
    if (seg.marked && !firstMarked) {
      firstMarked = piece;
      piece.id = "cited";
      piece.tabIndex = -1;
    }
    body.append(piece);
  }
  return { body, firstMarked };
}

function chunkTable(chunks, onPick) {
  return h(
    "div",
    { class: "table-wrap chunk-table" },
    h(
      "table",
      { id: "chunks-table" },
      h("caption", {}, chunks.length === 1 ? "1 chunk" : `${chunks.length} chunks`),
      h("thead", {}, h("tr", {}, ["#", "Span", "Page", "Tokens", "Section"].map((t) => h("th", { scope: "col" }, t)))),
      h(
        "tbody",
        {},
        chunks.map((c) =>
          h(
            "tr",
            { dataset: { ordinal: c.ordinal } },
            h("th", { scope: "row" }, h("a", { href: `#chunk-${c.ordinal}`, onclick: (e) => (e.preventDefault(), onPick(c)) }, `§${c.ordinal}`)),
            h("td", { class: "num" }, `${c.char_start}–${c.char_end}`),
            h("td", { class: "num" }, c.page ?? "—"),
            h("td", { class: "num" }, c.token_count),
            h("td", { class: "muted", title: (c.heading_path ?? []).join(" › ") }, (c.heading_path ?? []).at(-1) ?? ""),
          ),
        ),
      ),
    ),
  );
}

export async function render(root, ctx) {
  const id = ctx.args[0];
  const [doc, parsed] = await Promise.all([api(`/v1/documents/${id}`), api(`/v1/documents/${id}/text`)]);
  const start = ctx.query.get("start");
  const end = ctx.query.get("end");
  const mark = start !== null && end !== null ? { start: Number(start), end: Number(end) } : null;
  const chunkId = ctx.query.get("chunk");
  const focused = parsed.chunks.find((c) => c.id === chunkId);
  const { body, firstMarked } = textView(parsed.text, parsed.chunks, mark, focused?.ordinal ?? null);
  const pick = (c) => {
    for (const el of body.querySelectorAll(".focus")) el.classList.remove("focus");
    for (const el of body.querySelectorAll(".seg")) if (el.dataset.chunks.split(" ").includes(String(c.ordinal))) el.classList.add("focus");
    const marker = body.querySelector(`#chunk-${c.ordinal}`);
    marker?.scrollIntoView({ block: "center" });
  };
  add(
    root,
    pageHeader(doc.source_id, badge(doc.status)),
    h(
      "p",
      { class: "muted" },
      `${doc.title && doc.title !== doc.source_id ? `${doc.title} · ` : ""}version ${doc.version} · ${fmt.bytes(doc.size_bytes)} · ${doc.mime_type ?? "unknown type"} · updated ${fmt.time(doc.updated_at)} · `,
      h("a", { href: `#/documents?collection=${doc.collection_id}` }, "all documents"),
    ),
    doc.error ? h("p", { class: "notice notice-error", role: "alert" }, doc.error) : null,
    mark ? h("p", { class: "notice notice-info" }, `Showing the cited span ${mark.start}–${mark.end}${focused ? ` in chunk §${focused.ordinal}` : ""}. `, h("a", { href: "#cited", onclick: (e) => (e.preventDefault(), firstMarked?.scrollIntoView({ block: "center" })) }, "Jump to it")) : null,
    parsed.chunks.length
      ? h(
          "div",
          { class: "doc-layout" },
          h("section", { "aria-label": "Parsed text", class: "card" }, h("h2", {}, "Parsed text"), h("p", { class: "legend muted" }, "Chunks alternate in shade; § marks where each begins; overlaps are striped."), body),
          h("section", { "aria-label": "Chunks", class: "card" }, h("h2", {}, "Chunks"), chunkTable(parsed.chunks, pick)),
        )
      : h("p", { class: "empty" }, "This document has no chunks (yet)."),
  );
  if (firstMarked) {
    requestAnimationFrame(() => {
      firstMarked.scrollIntoView({ block: "center" });
      firstMarked.focus({ preventScroll: true });
    });
  }
}
