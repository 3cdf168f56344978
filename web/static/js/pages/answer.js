// One answer as people should read it: each sentence marked by the claim check (supported,
// unsupported, unknown) with its evidence on hover or focus, the mode that produced it, the context
// it was given, its citations, and thumbs up/down with a comment (POST /v1/messages/{id}/feedback).

import { api } from "../api.js";
import { add, clear, errorText, fmt, h, notice } from "../dom.js";

export const citationHref = (c) => `#/document/${c.document_id}?chunk=${c.chunk_id}&start=${c.char_start}&end=${c.char_end}`;

/** Text with every [n] turned into a link to citation n (`key`: the field holding n). */
export function linked(text, citations, key = "citation") {
  const byNumber = new Map(citations.map((c) => [c[key], c]));
  return text.split(/(\[\d+\])/).map((part) => {
    const c = byNumber.get(Number(part.match(/^\[(\d+)\]$/)?.[1]));
    return c ? h("a", { href: citationHref(c), class: "cite", title: `${c.source_id}: ${(c.text ?? "").slice(0, 120)}` }, part) : part;
  });
}

export function citationList(citations, key = "citation") {
  if (!citations.length) return null;
  return h(
    "ol",
    { class: "citations", "aria-label": "Citations" },
    citations.map((c) =>
      h(
        "li",
        { value: c[key] },
        h("a", { href: citationHref(c), class: "citation-link" }, c.source_id || c.title, c.page ? `, page ${c.page}` : "", ` (chars ${c.char_start}–${c.char_end})`),
        c.text ? h("blockquote", {}, c.text.length > 300 ? `${c.text.slice(0, 300)}…` : c.text) : null,
      ),
    ),
  );
}

const VERDICT_TEXT = { supported: "supported by its source", unsupported: "NOT supported by the sources", unknown: "could not be checked" };
const METHOD_TEXT = { quote: "quoted verbatim", lexical: "word overlap", model: "checked by a model", too_short: "too short to check", unverified: "no verifier" };

/** What the evidence panel says about one claim; its passage opens in the document when cited. */
function evidenceView(claim, citations) {
  const ev = claim.evidence;
  const cited = ev && citations.find((c) => c.citation === ev.citation && c.document_id);
  const at = cited && ev.char_start !== null ? { ...cited, chunk_id: ev.chunk_id, char_start: ev.char_start, char_end: ev.char_end } : null;
  return [
    h("p", {}, h("strong", { class: `verdict verdict-${claim.verdict}` }, claim.verdict), ` — this sentence is ${VERDICT_TEXT[claim.verdict] ?? claim.verdict}`, claim.method ? ` (${METHOD_TEXT[claim.method] ?? claim.method}${claim.coverage !== null && claim.coverage !== undefined ? `, ${Math.round(claim.coverage * 100)}% of its words found` : ""})` : "", "."),
    ev ? h("blockquote", { class: "evidence-text" }, ev.text) : h("p", { class: "muted" }, "No source passage covers it."),
    at ? h("a", { href: citationHref(at), class: "evidence-link" }, `Open the passage in ${cited.source_id}`) : null,
  ];
}

/** The answer's sentences as focusable spans marked with their verdict; `panel` shows the evidence. */
export function claimedAnswer(text, claims, citations, panel) {
  const parts = [];
  let at = 0;
  claims.forEach((claim, i) => {
    if (claim.start > at) parts.push(linked(text.slice(at, claim.start), citations));
    const show = () => {
      clear(panel, evidenceView(claim, citations));
      panel.hidden = false;
    };
    parts.push(
      h(
        "span",
        {
          class: `claim claim-${claim.verdict}`,
          tabindex: 0,
          dataset: { verdict: claim.verdict, claim: i },
          "aria-label": `Sentence ${i + 1}, ${claim.verdict}`,
          onmouseenter: show,
          onfocus: show,
        },
        linked(text.slice(claim.start, claim.end), citations),
      ),
    );
    at = Math.max(at, claim.end);
  });
  if (at < text.length) parts.push(linked(text.slice(at), citations));
  return parts;
}

export function groundingLine(claims) {
  if (!claims) return h("p", { class: "grounding grounding-none" }, "Sentences not checked against the sources.");
  if (!claims.length) return null;
  const count = (v) => claims.filter((c) => c.verdict === v).length;
  const bad = count("unsupported");
  return h(
    "p",
    { class: `grounding ${bad ? "grounding-bad" : "grounding-ok"}`, role: "status" },
    h("strong", {}, "Grounding: "),
    `${count("supported")} of ${claims.length} sentences supported`,
    bad ? `, ${bad} unsupported` : "",
    count("unknown") ? `, ${count("unknown")} not checkable` : "",
    ". Hover or focus a sentence for its evidence.",
  );
}

function modeLine(done) {
  const mode = done.answer_mode_used ?? done.answer_mode;
  if (!mode) return null;
  const how = mode === "quote" ? "quoted source sentences" : "written by the model, each sentence checked";
  return h(
    "p",
    { class: "muted mode-line" },
    `Answer mode: ${mode} (${how})`,
    done.quote_method ? ` · chosen by ${done.quote_method}` : "",
    done.model ? h("span", { class: "model-used" }, " · answered by ", h("code", {}, done.model)) : "",
    done.escalations?.length
      ? h("span", { class: "escalations" }, ` (after ${done.escalations.map((e) => `${e.from}: ${e.reason}`).join(", ")})`)
      : "",
    done.fallback ? ` · fallback: ${done.fallback}` : "",
  );
}

/** "5 sources retrieved; 2 left out for the token budget" (the sources event's context). */
export function contextLine(sourcesEvent, question) {
  const ctx = sourcesEvent.context;
  const dropped = ctx ? ctx.retrieved - ctx.used : 0;
  const rewritten = sourcesEvent.query && sourcesEvent.query !== question;
  return h(
    "p",
    { class: "muted context-line" },
    `${sourcesEvent.sources.length} sources in the prompt`,
    ctx && dropped > 0 ? `, ${dropped} of ${ctx.retrieved} retrieved left out for the ${ctx.token_budget}-token budget` : ctx ? ` (all ${ctx.retrieved} retrieved fit the ${ctx.token_budget}-token budget)` : "",
    rewritten ? h("span", { class: "rewritten" }, ` · follow-up searched as “${sourcesEvent.query}”`) : "",
  );
}

function feedbackForm(messageId) {
  if (!messageId) return null;
  let rating = null;
  const status = h("span", { class: "muted", role: "status" });
  const comment = h("textarea", { id: `fb-${messageId}`, rows: 2, maxlength: 10000, placeholder: "What was wrong or right? (optional)" });
  const thumb = (value, label) =>
    h("button", { type: "button", class: `secondary thumb thumb-${value}`, "aria-pressed": "false", dataset: { rating: value }, onclick: (e) => pick(value, e.currentTarget) }, label);
  const up = thumb("up", "Good answer");
  const down = thumb("down", "Bad answer");
  const send = h("button", { type: "submit", class: "primary", disabled: true }, "Send feedback");
  function pick(value, button) {
    rating = value;
    for (const b of [up, down]) b.setAttribute("aria-pressed", String(b === button));
    send.disabled = false;
  }
  const form = h(
    "form",
    { class: "feedback", "aria-label": "Feedback on this answer" },
    h("div", { class: "feedback-head" }, h("span", {}, "Was this answer right?"), up, down),
    h("div", { class: "field" }, h("label", { for: comment.id }, "Comment"), comment),
    h("div", { class: "actions" }, status, send),
  );
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    send.disabled = true;
    try {
      await api(`/v1/messages/${messageId}/feedback`, { method: "POST", json: { rating, comment: comment.value.trim() } });
      clear(form, notice("ok", `Feedback recorded (${rating === "up" ? "good" : "bad"} answer). Negative feedback can become an evaluation dataset.`));
    } catch (err) {
      status.textContent = errorText(err);
      send.disabled = false;
    }
  });
  return form;
}

/** Fill `answerEl` and `extra` with a finished answer: `done` is the ask `done` event or a stored turn. */
export function showAnswer(answerEl, extra, done, { messageId } = {}) {
  const citations = done.citations ?? [];
  const claims = done.claims;
  const panel = h("div", { class: "evidence", "aria-live": "polite", hidden: true });
  clear(answerEl, claims?.length ? claimedAnswer(done.answer ?? done.content, claims, citations, panel) : linked(done.answer ?? done.content, citations));
  add(
    extra,
    groundingLine(claims),
    panel,
    modeLine(done),
    citationList(citations),
    done.grounded === false ? notice("info", "No grounded answer: the documents do not seem to contain it.") : null,
    done.timings?.total_ms ? h("p", { class: "muted timings-line" }, `first token ${fmt.ms(done.timings.ttft_ms)} · total ${fmt.ms(done.timings.total_ms)} · ${done.usage?.completion_tokens ?? 0} tokens`) : null,
    feedbackForm(messageId),
  );
}
