// Form fields that show the server's refusal where it belongs: each field has a place for its
// error, tied to it (aria-describedby, aria-invalid); a refusal no field claims goes above.

import { where } from "./api.js";
import { clear, h } from "./dom.js";

/** A labelled ``control`` (it must have an id) with room for its error under it. */
export function field(label, control, hint) {
  const error = h("p", { class: "field-error", id: `${control.id}-error`, hidden: true });
  control.setAttribute("aria-describedby", `${control.id}-error`);
  return h("div", { class: "field" }, h("label", { for: control.id }, label),
    hint ? h("p", { class: "muted hint" }, hint) : null, control, error);
}

/** Clear every error in ``form``. */
export function clearErrors(form) {
  for (const el of form.querySelectorAll(".field-error")) { el.hidden = true; el.textContent = ""; }
  for (const el of form.querySelectorAll("[aria-invalid]")) el.removeAttribute("aria-invalid");
}

/** Show ``message`` at the control ``id`` (or, with no such control, in ``fallback``). */
export function fieldError(form, id, message, fallback) {
  const control = id && form.querySelector(`#${CSS.escape(id)}`);
  const slot = control && form.querySelector(`#${CSS.escape(`${id}-error`)}`);
  if (!slot) { fallback.hidden = false; fallback.append(h("span", {}, message, " ")); return; }
  control.setAttribute("aria-invalid", "true");
  slot.hidden = false;
  slot.textContent = message;
}

/** Place a refusal's messages: ``locate(path)`` names the control id for a field path
 * (``model_settings.temperature``), or null; the rest goes to ``fallback``. The first
 * control named gets the focus. */
export function showRefusal(form, error, locate, fallback) {
  clear(fallback);
  fallback.hidden = true;
  const items = Array.isArray(error.detail)
    ? error.detail.map((d) => [where(d.loc), d.msg]) : [[null, error.message]];
  for (const [path, message] of items) fieldError(form, path && locate(path), message, fallback);
  (form.querySelector("[aria-invalid=true]") ?? fallback).focus?.();
}
