// Agent files from the page: the open agent saved as an Agent File (``.af``, Letta's format)
// and a file imported as new agents.

import { api, postForm } from "./api.js";
import { guard, h, say } from "./dom.js";

/** Download ``agent`` as ``NAME.af``. */
export async function exportAgent(agent) {
  const file = await guard(() => api("GET", `/v1/agents/${agent.id}/export`));
  if (!file) return;
  const url = URL.createObjectURL(new Blob([JSON.stringify(file)], { type: "application/json" }));
  const link = h("a", { href: url, download: `${agent.name.replace(/[^\w.-]+/g, "_")}.af` });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
  say(`Exported ${agent.name}`);
}

/** The import field: ``done(ids)`` runs with the new agents' ids. */
export function importField(done) {
  const input = h("input", { type: "file", id: "import-file", accept: ".af,application/json" });
  input.addEventListener("change", async () => {
    const file = input.files?.[0];
    if (!file) return;
    const form = new FormData();
    form.append("file", file);
    const answer = await guard(() => postForm("/v1/agents/import", form));
    input.value = "";
    if (!answer) return;
    say(`Imported ${answer.agent_ids.length} agent${answer.agent_ids.length === 1 ? "" : "s"}`);
    await done(answer.agent_ids);
  });
  return [h("label", { for: "import-file" }, "Import an agent file"), input];
}
