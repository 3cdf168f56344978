// The shell: hash routes to page modules, the API-key dialog, the navigation's current entry.

import { api, auth, ApiError } from "./api.js";
import { clear, errorText, h, notice } from "./dom.js";

const PAGES = {
  collections: "./pages/collections.js",
  upload: "./pages/upload.js",
  documents: "./pages/documents.js",
  document: "./pages/document.js",
  search: "./pages/search.js",
  ask: "./pages/ask.js",
  jobs: "./pages/jobs.js",
  connectors: "./pages/connectors.js",
  metrics: "./pages/metrics.js",
  keys: "./pages/keys.js",
  agents: "./pages/agents.js",
  agent: "./pages/agent.js",
  evals: "./pages/evals.js",
  eval: "./pages/eval.js",
  mcp: "./pages/mcp.js",
};

const view = document.getElementById("view");
let cleanups = [];

/** "#/document/ID?chunk=X" -> {page: "document", args: ["ID"], query: URLSearchParams} */
function parseHash() {
  const [path, search = ""] = location.hash.replace(/^#\/?/, "").split("?");
  const [page, ...args] = path.split("/").filter(Boolean).map(decodeURIComponent);
  return { page: page || "collections", args, query: new URLSearchParams(search) };
}

async function route(event) {
  for (const fn of cleanups.splice(0)) fn();
  const { page, args, query } = parseHash();
  // A detail page lights up its list's navigation entry.
  const nav = { document: "documents", agent: "agents", eval: "evals" }[page] ?? page;
  for (const a of document.querySelectorAll("#nav a")) {
    if (a.getAttribute("href") === `#/${nav}`) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  closeMenu();
  const module = PAGES[page];
  if (!module) {
    clear(view, h("h1", {}, "Not found"), h("p", {}, `No page “${page}”.`));
    return;
  }
  clear(view, h("p", { class: "loading" }, "Loading…"));
  const ctx = { page, args, query, onCleanup: (fn) => cleanups.push(fn) };
  try {
    const { render } = await import(module);
    const content = h("div", { class: `page page-${page}` });
    await render(content, ctx);
    if (parseHash().page !== page) return;
    clear(view, content);
    // Keyboard and screen-reader users land on the new page's content, not back in the menu.
    if (event?.type === "hashchange") view.focus({ preventScroll: true });
    document.title = `${content.querySelector("h1")?.textContent ?? "Groundwork"} · Groundwork`;
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) {
      clear(view, notice("error", "An API key is needed to see this page."));
    } else {
      clear(view, h("h1", {}, "Something went wrong"), notice("error", errorText(err)));
    }
  }
}

// API key: asked for when the server answers 401, kept in sessionStorage only.
const dialog = document.getElementById("key-dialog");
const keyInput = document.getElementById("key-input");
const keyError = document.getElementById("key-error");

function askForKey(message = "") {
  keyError.textContent = message;
  keyInput.value = "";
  if (!dialog.open) dialog.showModal();
  keyInput.focus();
}

// NOTE: a page fires several requests; their 401s arrive in any order, also while the dialog is open
// and a key is being tried, so a late one must not wipe what the person typed or the refusal shown.
window.addEventListener("gw:unauthorized", (e) => {
  if (!dialog.open) askForKey(auth.get() ? e.detail.message : "");
});

document.getElementById("key-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  const previous = auth.get();
  auth.set(keyInput.value.trim());
  try {
    const tenant = await whoAmI();
    if (tenant.auth_required === false) {
      // NOTE: accepted only in the sense that nothing checks it: do not let it pass for a valid key.
      keyError.textContent = "Auth is off: this key is not checked; requests act as the default tenant.";
      return;
    }
    dialog.close();
    route();
  } catch (err) {
    if (previous) auth.set(previous);
    else auth.clear();
    keyError.textContent = `Refused: ${errorText(err)}`;
    if (!dialog.open) dialog.showModal();
  }
});
document.getElementById("key-forget").addEventListener("click", () => {
  auth.clear();
  document.getElementById("who").textContent = "";
  askForKey("Key forgotten.");
});
document.getElementById("change-key").addEventListener("click", () => askForKey());

async function whoAmI() {
  const tenant = await api("/v1/tenant");
  document.getElementById("who").textContent = `Tenant: ${tenant.name}`;
  // With auth off any key "works": say that no key is checked instead of asking for one.
  const open = tenant.auth_required === false;
  document.getElementById("auth-banner").hidden = !open;
  document.getElementById("key-explain").textContent = open
    ? "Auth is off on this server: no key is needed and none is checked; every request acts as the default tenant."
    : "This platform requires an API key. It is kept in this browser tab only (session storage).";
  keyInput.required = !open;
  return tenant;
}

// Narrow windows: the navigation folds behind a Menu button.
const toggle = document.querySelector(".menu-toggle");
function closeMenu() {
  document.body.classList.remove("menu-open");
  toggle.setAttribute("aria-expanded", "false");
}
toggle.addEventListener("click", () => {
  const open = document.body.classList.toggle("menu-open");
  toggle.setAttribute("aria-expanded", String(open));
});

// The skip link targets #view: focus the content without the router reading "view" as a page.
document.querySelector(".skip").addEventListener("click", (e) => {
  e.preventDefault();
  view.focus();
  view.scrollIntoView();
});

window.addEventListener("hashchange", route);
whoAmI().catch(() => {});
route();
