// Ask playground: answers streamed token by token, then shown with their claim check (answer.js);
// follow-up questions continue the conversation. The conversation is in the URL (#/ask?conversation=),
// so opening a citation and going back restores it; past conversations are listed to reopen.

import { api, stream } from "../api.js";
import { clear, collectionPicker, errorText, fmt, h, notice, pageHeader } from "../dom.js";
import { contextLine, showAnswer } from "./answer.js";

export { citationHref } from "./answer.js";

const MODES = [
  ["", "server default"],
  ["auto", "auto (quote with small models)"],
  ["quote", "quote: source sentences only"],
  ["generate", "generate: written, then checked"],
];

function turnView(question) {
  const answer = h("div", { class: "answer", "aria-live": "polite" });
  const extra = h("div", { class: "turn-extra" });
  const el = h("article", { class: "turn card" }, h("p", { class: "question" }, h("strong", {}, "Q: "), question), answer, extra);
  return { el, answer, extra };
}

/** Stored turns (GET /v1/conversations/{id}) drawn as asked: question, then the checked answer. */
function restoredTurns(turns) {
  const out = [];
  for (let i = 0; i < turns.length; i++) {
    if (turns[i].role !== "user") continue;
    const view = turnView(turns[i].content);
    const reply = turns[i + 1]?.role === "assistant" ? turns[i + 1] : null;
    if (reply) {
      if (reply.query && reply.query !== turns[i].content) view.extra.append(h("p", { class: "muted context-line" }, h("span", { class: "rewritten" }, `follow-up searched as “${reply.query}”`)));
      showAnswer(view.answer, view.extra, reply, { messageId: reply.id });
    }
    out.push(view.el);
  }
  return out;
}

function pastList(conversations, current, collectionId) {
  if (!conversations.length) return null;
  return h(
    "details",
    { class: "card past", id: "past-conversations" },
    h("summary", {}, `Past conversations (${conversations.length})`),
    h(
      "ul",
      {},
      conversations.map((c) =>
        h(
          "li",
          {},
          h(
            "a",
            { href: `#/ask?collection=${c.collection_ids[0] ?? collectionId ?? ""}&conversation=${c.id}`, "aria-current": c.id === current ? "true" : null },
            c.title || "(untitled)",
          ),
          h("span", { class: "muted" }, ` · ${Math.ceil(c.messages / 2)} turn${c.messages > 2 ? "s" : ""} · ${fmt.time(c.created_at)}`),
        ),
      ),
    ),
  );
}

export async function render(root, ctx) {
  let conversationId = ctx.query.get("conversation");
  let restored = null;
  if (conversationId) {
    try {
      restored = await api(`/v1/conversations/${conversationId}`);
    } catch (err) {
      root.append(notice("error", `Conversation not restored: ${errorText(err)}`));
      conversationId = null;
    }
  }
  const picker = await collectionPicker(restored?.collection_ids[0] ?? ctx.query.get("collection"), (c) => {
    collection = c;
    reset();
  });
  let collection = picker.collection;
  let controller = null;
  const thread = h("div", { class: "conversation", id: "conversation" });
  const convLabel = h("span", { class: "muted", id: "conversation-label" });
  const label = () => (convLabel.textContent = conversationId ? `Conversation ${conversationId.slice(0, 8)}` : "No conversation yet");
  // The URL names the conversation (replaceState: no new route, no re-render) so Back restores it.
  const remember = () => history.replaceState(null, "", `#/ask?collection=${collection?.id ?? ""}${conversationId ? `&conversation=${conversationId}` : ""}`);
  const reset = () => {
    conversationId = null;
    clear(thread);
    label();
    remember();
  };
  label();
  if (restored) thread.append(...restoredTurns(restored.turns));
  const past = await api("/v1/conversations?limit=30").catch(() => []);

  const question = h("textarea", { id: "question", name: "question", rows: 3, required: true, placeholder: "Ask something your documents answer" });
  const topK = h("input", { id: "ask-k", type: "number", min: 1, max: 50, value: "5" });
  const maxTokens = h("input", { id: "ask-max", type: "number", min: 1, max: 4096, value: "128" });
  const mode = h("select", { id: "ask-mode" }, MODES.map(([v, t]) => h("option", { value: v }, t)));
  const rewrite = h("input", { id: "ask-rewrite", type: "checkbox", checked: true });
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
      h("div", { class: "field" }, h("label", { for: "ask-mode" }, "Answer mode"), mode),
      h("div", { class: "field" }, h("label", { for: "ask-k" }, "Sources retrieved (k)"), topK),
      h("div", { class: "field" }, h("label", { for: "ask-max" }, "Max answer tokens"), maxTokens),
    ),
    h("div", { class: "field inline" }, rewrite, h("label", { for: "ask-rewrite" }, "Rewrite follow-ups into a standalone search (shown with the sources)")),
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
    thread.append(turn.el);
    const body = {
      question: question.value.trim(),
      collection: collection.id,
      conversation_id: conversationId,
      retrieval: { top_k: Number(topK.value) || 5 },
      generation: { max_tokens: Number(maxTokens.value) || 128 },
      answer_mode: mode.value || null,
      rewrite_follow_up: rewrite.checked,
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
            turn.extra.append(contextLine(event, body.question));
          } else if (event.type === "token") {
            turn.answer.append(event.text);
          } else if (event.type === "done") {
            conversationId = event.conversation_id ?? conversationId;
            label();
            remember();
            showAnswer(turn.answer, turn.extra, event, { messageId: event.message_id });
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
  root.append(pageHeader("Ask playground"), pastList(past, conversationId, collection?.id), thread, form);
}
