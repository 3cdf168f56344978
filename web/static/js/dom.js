// Small DOM helpers: element builder, formatting, notices, dialogs, the collection picker.

import { listCollections } from "./api.js";

/** h("button", {class: "primary", onclick: f}, "Save") -> element. Children may be nested arrays or null. */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs ?? {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else if (name === "class") el.className = value;
    else if (name === "dataset") Object.assign(el.dataset, value);
    else if (name in el && typeof value !== "string") el[name] = value;
    else el.setAttribute(name, value === true ? "" : value);
  }
  append(el, children);
  return el;
}

/** el.append(...) that skips null, undefined and false (conditional children). */
export function add(el, ...children) {
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
}

export function clear(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

export const fmt = {
  time: (iso) => (iso ? new Date(iso).toLocaleString() : "—"),
  num: (n, digits = 0) => (n === null || n === undefined ? "—" : Number(n).toFixed(digits)),
  score: (n) => (n === null || n === undefined ? "—" : Number(n).toPrecision(3)),
  ms: (n) => (n === null || n === undefined ? "—" : `${Number(n).toFixed(1)} ms`),
  bytes: (n) => (n < 1024 ? `${n} B` : n < 1048576 ? `${(n / 1024).toFixed(1)} KB` : `${(n / 1048576).toFixed(1)} MB`),
  duration: (s) => {
    if (s === null || s === undefined || !Number.isFinite(s)) return "—";
    if (s < 60) return `${Math.round(s)} s`;
    return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
  },
};

export function badge(status) {
  return h("span", { class: `badge badge-${status}` }, status);
}

/** A notice in a role=alert/status region; kind: "error" | "ok" | "info". */
export function notice(kind, text) {
  return h("p", { class: `notice notice-${kind}`, role: kind === "error" ? "alert" : "status" }, text);
}

/** Show `message` in `where` and move the focus to it: after an action removed the control that had
 * the focus (a deleted row's button), focus would otherwise fall back to the page's start. */
export function announce(where, kind, message) {
  const el = notice(kind, message);
  el.tabIndex = -1;
  clear(where, el);
  el.focus();
  return el;
}

export function errorText(err) {
  return err?.status ? `${err.message} (HTTP ${err.status})` : String(err?.message ?? err);
}

export function pageHeader(title, ...extra) {
  return h("div", { class: "page-head" }, h("h1", {}, title), extra);
}

/** A modal <dialog> asking to confirm; resolves true when confirmed. */
export function confirmDialog(title, message, confirmLabel = "Delete") {
  return new Promise((resolve) => {
    const dialog = h(
      "dialog",
      { class: "confirm", "aria-labelledby": "confirm-title" },
      h(
        "form",
        { method: "dialog" },
        h("h2", { id: "confirm-title" }, title),
        h("p", {}, message),
        h(
          "div",
          { class: "actions" },
          h("button", { value: "cancel", class: "secondary", autofocus: true }, "Cancel"),
          h("button", { value: "ok", class: "danger" }, confirmLabel),
        ),
      ),
    );
    dialog.addEventListener("close", () => {
      resolve(dialog.returnValue === "ok");
      dialog.remove();
    });
    document.body.append(dialog);
    dialog.showModal();
  });
}

const PICKED = "groundwork.collection";

/** A labelled <select> of the tenant's collections; remembers the choice for the other pages. */
export async function collectionPicker(preferred, onChange) {
  const collections = await listCollections();
  const wanted = preferred || sessionStorage.getItem(PICKED);
  const chosen = collections.find((c) => c.id === wanted || c.name === wanted) ?? collections[0];
  const select = h(
    "select",
    {
      id: "collection-picker",
      onchange: () => {
        sessionStorage.setItem(PICKED, select.value);
        onChange(collections.find((c) => c.id === select.value));
      },
    },
    collections.map((c) => h("option", { value: c.id, selected: c === chosen }, c.name)),
  );
  if (chosen) sessionStorage.setItem(PICKED, chosen.id);
  const el = h(
    "div",
    { class: "field inline" },
    h("label", { for: "collection-picker" }, "Collection"),
    collections.length ? select : h("span", {}, "none yet — ", h("a", { href: "#/collections" }, "create one")),
  );
  return { el, collection: chosen, collections };
}

/** schedule(fn, ms) runs fn later, replacing what was scheduled; schedule() only cancels. Once the
 * route changes nothing runs, also when a request in flight then tries to schedule the next poll. */
export function poller(ctx) {
  let timer;
  let stopped = false;
  ctx.onCleanup(() => {
    stopped = true;
    clearTimeout(timer);
  });
  return (fn, ms) => {
    clearTimeout(timer);
    if (fn && !stopped) timer = setTimeout(fn, ms);
  };
}
