// The platform's REST API as the UI uses it: the same endpoints, auth and JSON errors as any client.

const KEY = "groundwork.apiKey";

export class ApiError extends Error {
  constructor(status, code, message, details) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details;
  }
}

export const auth = {
  get: () => sessionStorage.getItem(KEY),
  set: (key) => sessionStorage.setItem(KEY, key),
  clear: () => sessionStorage.removeItem(KEY),
};

function headers(extra = {}) {
  const key = auth.get();
  return key ? { ...extra, Authorization: `Bearer ${key}` } : extra;
}

async function fail(response) {
  const body = await response.json().catch(() => null);
  const error = body?.error ?? {};
  const err = new ApiError(response.status, error.code ?? "error", error.message ?? response.statusText, error.details);
  if (response.status === 401) window.dispatchEvent(new CustomEvent("gw:unauthorized", { detail: err }));
  throw err;
}

/** JSON in, JSON out (`as: "blob"` or "text" for other bodies, e.g. images an <img> could not fetch
 * with the key); `form` sends multipart (uploads). Throws ApiError with the server's message. */
export async function api(path, { method = "GET", json, form, signal, as = "json" } = {}) {
  const init = { method, signal, headers: headers(json ? { "Content-Type": "application/json" } : {}) };
  if (json !== undefined) init.body = JSON.stringify(json);
  if (form !== undefined) init.body = form;
  const response = await fetch(path, init);
  if (!response.ok) await fail(response);
  return response.status === 204 ? null : response[as]();
}

// A server that answers 503 with Retry-After (busy generating, or its database restarting) is asked
// again after that many seconds, for this long in all. NOTE: a time budget, not a count of tries:
// Retry-After is 2 s before the server has timed any answer, and one long answer outlasted 10 tries.
const BUSY_PATIENCE_S = 300;

function pause(seconds, signal) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, seconds * 1000);
    signal?.addEventListener("abort", () => {
      clearTimeout(timer);
      reject(new DOMException("Stopped", "AbortError"));
    }, { once: true });
  });
}

/** POST `json` and call onEvent(event) for each server-sent event's data, until the stream ends.
 * While the server is busy, onEvent gets `{type: "busy", retry_after}` before each new try. */
export async function stream(path, json, onEvent, signal) {
  let response;
  for (let waited = 0; ; ) {
    response = await fetch(path, {
      method: "POST",
      signal,
      headers: headers({ "Content-Type": "application/json", Accept: "text/event-stream" }),
      body: JSON.stringify(json),
    });
    const wait = Number(response.headers.get("Retry-After"));
    if (response.ok || response.status !== 503 || !wait || waited + wait > BUSY_PATIENCE_S) break;
    await response.body?.cancel();
    onEvent({ type: "busy", retry_after: wait });
    await pause(wait, signal);
    waited += wait;
  }
  if (!response.ok) await fail(response);
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value;
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      const data = block.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trim()).join("\n");
      if (data) onEvent(JSON.parse(data));
    }
  }
}

/** The tenant's collections, by name. */
export const listCollections = () => api("/v1/collections");
