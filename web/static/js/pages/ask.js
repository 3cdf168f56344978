// Ask playground: answers streamed token by token; each [n] in the answer links to the cited span in
// its document; follow-up questions continue the conversation.

import { stream } from "../api.js";
import { add, clear, collectionPicker, errorText, fmt, h, notice, pageHeader } from "../dom.js";

export const citationHref = (c) => `#/document/${c.document_id}?chunk=${c.chunk_id}&start=${c.char_start}&end=${c.char_end}`;

/** The answer's text with every [n] turned into a link to citation n. */
function linkedAnswer(answer, citations) {
  const byNumber = new Map(citations.map((c) => [c.citation, c]));
  const parts = answer.split(/(\[\d+\])/);
  return parts.map((part) => {
    const m = part.match(/^\[(\d+)\]$/);
    const c = m && byNumber.get(Number(m[1]));
    return c ? h("a", { href: citationHref(c), class: "cite", title: `${c.source_id}: ${c.text.slice(0, 120)}` }, part) : part;
  });
}

function citationList(citations) {
  if (!citations.length) return null;
  return h(
    "ol",
    { class: "citations", "aria-label": "Citations" },
    citations.map((c) =>
      h(
        "li",
        { value: c.citation },
        h("a", { href: citationHref(c), class: "citation-link" }, c.source_id || c.title, c.page ? `, page ${c.page}` : "", ` (chars ${c.char_start}–${c.char_end})`),
        h("blockquote", {}, c.text.length > 300 ? `${c.text.slice(0, 300)}…` : c.text),
      ),
    ),
  );
}

function turnView(question) {
  const answer = h("div", { class: "answer", "aria-live": "polite" });
  const extra = h("div", { class: "turn-extra" });
  const el = h("article", { class: "turn card" }, h("p", { class: "question" }, h("strong", {}, "Q: "), question), answer, extra);
  return { el, answer, extra };
}

export async function render(root, ctx) {
  const picker = await collectionPicker(ctx.query.get("collection"), (c) => {
    collection = c;
    reset();
  });
  let collection = picker.collection;
  let conversationId = null;
  let controller = null;
  const history = h("div", { class: "conversation", id: "conversation" });
  const convLabel = h("span", { class: "muted" });
  const reset = () => {
    conversationId = null;
    clear(history);
    convLabel.textContent = "New conversation";
  };
  reset();

  const question = h("textarea", { id: "question", name: "question", rows: 3, required: true, placeholder: "Ask something your documents answer" });
  const topK = h("input", { id: "ask-k", type: "number", min: 1, max: 50, value: "5" });
  const maxTokens = h("input", { id: "ask-max", type: "number", min: 1, max: 4096, value: "128" });
  const send = h("button", { type: "submit", class: "primary" }, "Ask");
  const stop = h("button", { type: "button", class: "secondary", disabled: true, onclick: () => controller?.abort() }, "Stop");
  const form = h(
    "form",
    { class: "card ask-form" },
    h("div", { class: "toolbar" }, picker.el, convLabel, h("button", { type: "button", class: "link", onclick: reset }, "New conversation")),
    h("div", { class: "field" }, h("label", { for: "question" }, "Question"), question),
    h(
      "div",
      { class: "grid" },
      h("div", { class: "field" }, h("label", { for: "ask-k" }, "Sources retrieved (k)"), topK),
      h("div", { class: "field" }, h("label", { for: "ask-max" }, "Max answer tokens"), maxTokens),
    ),
    h("div", { class: "actions" }, stop, send),
  );
  question.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) form.requestSubmit();
  });
  ctx.onCleanup(() => controller?.abort());

  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    if (!collection || !question.value.trim()) return;
    const turn = turnView(question.value.trim());
    history.append(turn.el);
    const body = {
      question: question.value.trim(),
      collection: collection.id,
      conversation_id: conversationId,
      retrieval: { top_k: Number(topK.value) || 5 },
      generation: { max_tokens: Number(maxTokens.value) || 128 },
      stream: true,
    };
    question.value = "";
    controller = new AbortController();
    let busy = null; // the "server is busy" line, while the question waits for a free slot
    send.disabled = true;
    stop.disabled = false;
    turn.answer.classList.add("streaming");
    try {
      await stream(
        "/v1/ask",
        body,
        (event) => {
          if (event.type === "busy") {
            busy ??= turn.extra.appendChild(h("p", { class: "muted busy-line" }));
            busy.textContent = `The server is generating as many answers as it takes at once; asking again in ${event.retry_after} s…`;
          } else if (event.type === "sources") {
            busy?.remove();
            turn.extra.append(h("p", { class: "muted" }, `${event.sources.length} sources retrieved`, event.query !== body.question ? ` for the follow-up rewritten as “${event.query}”` : ""));
          } else if (event.type === "token") {
            turn.answer.append(event.text);
          } else if (event.type === "done") {
            conversationId = event.conversation_id ?? conversationId;
            convLabel.textContent = conversationId ? `Conversation ${conversationId.slice(0, 8)}` : "";
            clear(turn.answer, linkedAnswer(event.answer, event.citations));
            const t = event.timings;
            add(
              turn.extra,
              citationList(event.citations),
              event.grounded ? null : notice("info", "No grounded answer: the documents do not seem to contain it."),
              h("p", { class: "muted timings-line" }, `first token ${fmt.ms(t.ttft_ms)} · total ${fmt.ms(t.total_ms)} · ${event.usage.completion_tokens} tokens`),
            );
          }
        },
        controller.signal,
      );
    } catch (err) {
      turn.extra.append(notice(err.name === "AbortError" ? "info" : "error", err.name === "AbortError" ? "Stopped." : errorText(err)));
    } finally {
      busy?.remove();
      turn.answer.classList.remove("streaming");
      send.disabled = false;
      stop.disabled = true;
      question.focus();
    }
  });
  root.append(pageHeader("Ask playground"), history, form);
}
