// The REST API as the page uses it: JSON calls and SSE streams, with the saved password.

const KEY = "stateloop.password";

export class Unauthorized extends Error {}

/** A call the server refused: its status and its ``detail`` (a 422's list names the fields). */
export class Refused extends Error {
  constructor(status, detail, message) { super(message); this.status = status; this.detail = detail; }
}

export function password() { return sessionStorage.getItem(KEY) || ""; }
export function setPassword(value) { sessionStorage.setItem(KEY, value); }

/** The credential header, for a request made another way (an upload's XMLHttpRequest). */
export function authHeaders() { return password() ? { Authorization: `Bearer ${password()}` } : {}; }

function headers(json) {
  return { ...(json ? { "Content-Type": "application/json" } : {}), ...authHeaders() };
}

/** A 422 location as a field path: ``["body", "model_settings", "temperature"]`` reads
 * ``model_settings.temperature``. */
export function where(loc = []) { return (loc[0] === "body" ? loc.slice(1) : loc).join("."); }

async function failure(response) {
  if (response.status === 401) {
    window.dispatchEvent(new Event("stateloop:login"));  // the page asks for a credential
    let why = "";  // a key that was one says what became of it (revoked, expired)
    try { why = (await response.json()).detail; } catch { /* not JSON */ }
    return new Unauthorized(password() && typeof why === "string" && !why.startsWith("missing")
      ? `401: ${why}` : "This server needs its password.");
  }
  let detail = response.statusText, said = detail;
  try {
    const body = await response.json();
    detail = body.detail ?? body;
    said = typeof detail === "string" ? detail
      : Array.isArray(detail) ? detail.map((d) => `${where(d.loc)}: ${d.msg}`).join("; ")
        : JSON.stringify(detail);
  } catch { /* not JSON: keep the status text */ }
  return new Refused(response.status, detail, `${response.status}: ${said}`);
}

/** A JSON call: the parsed answer, or an Error carrying the server's detail. */
export async function api(method, path, body, query) {
  const url = new URL(path, location.origin);
  for (const [k, v] of Object.entries(query || {})) {
    if (v !== undefined && v !== null && v !== "") url.searchParams.set(k, v);
  }
  const response = await fetch(url, {
    method, headers: headers(body !== undefined),
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!response.ok) throw await failure(response);
  const text = await response.text();
  return text ? JSON.parse(text) : null;
}

/** POST a multipart ``form`` (a file); the parsed answer, or an Error as ``api`` gives. */
export async function postForm(path, form) {
  const response = await fetch(path, { method: "POST", headers: authHeaders(), body: form });
  if (!response.ok) throw await failure(response);
  return response.json();
}

/** POST ``body`` and call ``onFrame`` with each SSE frame until ``[DONE]``. */
export async function stream(path, body, onFrame, signal) {
  const response = await fetch(path, {
    method: "POST", headers: headers(true), body: JSON.stringify(body), signal,
  });
  if (!response.ok) throw await failure(response);
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      const data = event.split("\n").filter((l) => l.startsWith("data: "))
        .map((l) => l.slice(6)).join("\n");
      if (!data) continue;
      if (data === "[DONE]") return;
      onFrame(JSON.parse(data));
    }
  }
}
