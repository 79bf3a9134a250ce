// Folders and files: folders made, attached to the agent or detached, files uploaded with a
// progress bar and their parsing state followed until each is done (or says why not).

import { api, authHeaders } from "./api.js";
import { clear, guard, h, say } from "./dom.js";
import { refreshAgent } from "./app.js";

const DONE = new Set(["completed", "error"]);

/** POST ``file`` to ``folder``, calling ``progress(fraction)`` as its bytes go (fetch cannot
 * report an upload's progress; XMLHttpRequest can). */
function upload(folderId, file, progress) {
  return new Promise((resolve, reject) => {
    const request = new XMLHttpRequest();
    request.open("POST", `/v1/folders/${folderId}/upload`);
    for (const [k, v] of Object.entries(authHeaders())) request.setRequestHeader(k, v);
    request.upload.onprogress = (e) => { if (e.lengthComputable) progress(e.loaded / e.total); };
    request.onload = () => {
      let body = null;
      try { body = JSON.parse(request.responseText); } catch { /* not JSON */ }
      if (request.status < 300) { progress(1); resolve(body); return; }
      if (request.status === 401) window.dispatchEvent(new Event("stateloop:login"));
      const detail = body?.detail;
      reject(new Error(`${request.status}: ${typeof detail === "string" ? detail
        : Array.isArray(detail) ? detail.map((d) => d.msg).join("; ") : request.statusText}`));
    };
    request.onerror = () => reject(new Error("the upload did not reach the server"));
    const form = new FormData();
    form.append("file", file);
    request.send(form);
  });
}

function fileRow(file) {
  const state = file.processing_status;
  return h("li", { class: "file", "data-status": state },
    h("span", {}, file.file_name), h("span", { class: `file-state ${state === "error" ? "bad" : state === "completed" ? "good" : "muted"}` },
      state, file.error_message ? `: ${file.error_message}` : "",
      state === "completed" && file.total_chunks != null ? ` · ${file.total_chunks} chunks` : ""));
}

function folderCard(folder, attached, agent, redraw, panel) {
  const files = h("ul", { class: "passages", "aria-label": `Files in ${folder.name}` });
  const input = h("input", { type: "file", id: `upload-${folder.id}` });
  const bar = h("progress", { max: "1", value: "0", hidden: true, "aria-label": `Upload to ${folder.name}` });
  const showFiles = async (wait = 250) => {
    const listed = await guard(() => api("GET", `/v1/folders/${folder.id}/files`, undefined, { limit: 100 })) ?? [];
    clear(files, listed.length ? listed.map(fileRow) : h("li", { class: "muted" }, "No files"));
    // parsing goes on in the server: look again, less often as it takes longer, while a
    // file is not done and this view is shown
    if (listed.some((f) => !DONE.has(f.processing_status)) && panel.contains(files)) {
      setTimeout(() => showFiles(Math.min(5000, wait * 2)), wait);
    }
  };
  const send = async (e) => {
    e.preventDefault();
    const file = input.files?.[0];
    if (!file) { say("Choose a file first", true); return; }
    bar.hidden = false;
    bar.value = 0;
    try {
      await upload(folder.id, file, (done) => { bar.value = done; });
    } catch (error) { say(error.message, true); return; }
    say(`Uploaded ${file.name} to ${folder.name}`);
    input.value = "";
    showFiles();
  };
  const toggle = async () => {
    const verb = attached ? "detach" : "attach";
    if (await guard(() => api("PATCH", `/v1/agents/${agent.id}/folders/${verb}/${folder.id}`)) === undefined) return;
    say(`${attached ? "Detached" : "Attached"} ${folder.name}`);
    await refreshAgent();
    redraw();
  };
  showFiles();
  return h("section", { class: "card", "aria-label": `Folder ${folder.name}` },
    h("h4", {}, folder.name, attached ? h("small", { class: "good" }, " · attached") : null),
    h("button", { type: "button", onclick: toggle }, `${attached ? "Detach" : "Attach"} ${folder.name}`),
    files,
    h("form", { class: "row", onsubmit: send },
      h("label", { for: input.id }, "File to upload"), input, h("button", { type: "submit" }, "Upload"), bar));
}

export async function filesView(panel, agent) {
  const redraw = () => filesView(panel, agent);
  const [all, mine] = await Promise.all([guard(() => api("GET", "/v1/folders", undefined, { limit: 100 })),
    guard(() => api("GET", `/v1/agents/${agent.id}/folders`))]);
  const attached = new Set((mine ?? []).map((f) => f.id));
  const name = h("input", { id: "folder-name", required: true });
  const make = async (e) => {
    e.preventDefault();
    if (!name.value.trim()) return;
    if (await guard(() => api("POST", "/v1/folders", { name: name.value.trim() }))) {
      say(`Made folder ${name.value.trim()}`);
      redraw();
    }
  };
  clear(panel, h("h3", {}, "Folders and files"),
    h("form", { class: "row", onsubmit: make }, h("label", { for: "folder-name" }, "New folder"), name,
      h("button", { type: "submit" }, "Make folder")),
    (all ?? []).length ? all.map((f) => folderCard(f, attached.has(f.id), agent, redraw, panel))
      : h("p", { class: "muted" }, "No folders yet"));
}
