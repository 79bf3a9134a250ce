// Tools: the agent's tools with their source and schema, and approval toggled per agent.

import { api } from "./api.js";
import { clear, guard, h, say } from "./dom.js";
import { refreshAgent, current } from "./app.js";

function needsApproval(agent, name) {
  return (agent.tool_rules || []).some((r) => r.type === "requires_approval" && r.tool_name === name);
}

export async function toolsView(panel, agent) {
  const tools = await guard(() => api("GET", `/v1/agents/${agent.id}/tools`)) || [];
  const rows = tools.map((tool) => {
    const id = `approve-${tool.name}`;
    const box = h("input", { type: "checkbox", id, checked: needsApproval(current() || agent, tool.name),
      onchange: async () => {
        const state = await guard(() => api("PATCH", `/v1/agents/${agent.id}/tools/approval/${encodeURIComponent(tool.name)}`,
          { requires_approval: box.checked }));
        if (!state) { box.checked = !box.checked; return; }
        say(`${tool.name}: ${box.checked ? "asks for approval" : "runs without asking"}`);
        await refreshAgent();
      } });
    return h("details", { class: "tool" },
      h("summary", {}, h("code", {}, tool.name), h("span", { class: "muted" }, tool.tool_type),
        h("span", {}, tool.description ?? "")),
      h("div", { class: "check" }, box, h("label", { for: id }, "Ask for approval before each call (this agent)")),
      tool.source_code ? [h("h4", {}, "Source"), h("pre", { tabindex: "0" }, tool.source_code)] : null,
      h("h4", {}, "Schema"), h("pre", { tabindex: "0" }, JSON.stringify(tool.json_schema, null, 2)));
  });
  clear(panel, h("h3", {}, "Tools"), rows.length ? rows : h("p", { class: "muted" }, "This agent has no tools"));
}
