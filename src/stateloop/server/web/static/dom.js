// A tiny element builder and a few formatting helpers shared by the views.

/** h("button", {onclick, class: "x"}, "text", child...): an element. */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "class") el.className = value;
    else if (key in el && typeof value !== "string") el[key] = value;
    else el.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

export function clear(el, ...children) { el.replaceChildren(); for (const c of children.flat()) if (c) el.append(c); return el; }

/** ``at`` (ISO text) as local time, or ``none``. */
export function when(at, none = "–") { return at ? new Date(at).toLocaleString() : none; }

export function ms(ns) { return ns == null ? "–" : `${(ns / 1e6).toFixed(ns < 1e7 ? 1 : 0)} ms`; }

export function pretty(text) {
  try { return JSON.stringify(JSON.parse(text), null, 2); } catch { return text ?? ""; }
}

/** Show ``message`` in the status line (errors stay until the next one). */
export function say(message, isError = false) {
  const status = document.getElementById("status");
  status.textContent = message;
  status.classList.toggle("error", isError);
}

/** Run ``fn``; an error goes to the status line instead of the console. */
export async function guard(fn) {
  try { return await fn(); } catch (error) { say(error.message, true); return undefined; }
}
