// MCP servers: one described and tested (connected, its tools listed, nothing stored), added,
// listed with their tools, each tool attached to the agent; a server removed.

import { api } from "./api.js";
import { clear, guard, h, say } from "./dom.js";
import { clearErrors, field, showRefusal } from "./fields.js";
import { refreshAgent } from "./app.js";

function toolList(tools, agent, label) {
  return h("ul", { class: "passages", "aria-label": label }, tools.length ? tools.map((t) => h("li", {},
    h("span", {}, h("code", {}, t.name), " ", h("small", { class: "muted" }, t.description ?? "")),
    t.id ? h("button", { type: "button", "aria-label": `Attach ${t.name}`, onclick: async () => {
      if (await guard(() => api("PATCH", `/v1/agents/${agent.id}/tools/attach/${t.id}`)) === undefined) return;
      say(`Attached ${t.name}`);
      await refreshAgent();
    } }, "Attach") : null)) : h("li", { class: "muted" }, "No tools"));
}

function serverCard(server, agent, redraw) {
  const tools = h("div", {});
  const show = async () => {
    const listed = await guard(() => api("GET", `/v1/mcp-servers/${server.id}/tools`));
    if (listed) clear(tools, toolList(listed, agent, `Tools of ${server.server_name}`));
  };
  const remove = async () => {
    if (!confirm(`Remove the MCP server ${server.server_name}?`)) return;
    if (await guard(() => api("DELETE", `/v1/mcp-servers/${server.id}`)) === undefined) return;
    say(`Removed ${server.server_name}`);
    redraw();
  };
  return h("section", { class: "card", "aria-label": `MCP server ${server.server_name}` },
    h("h4", {}, server.server_name, " ", h("small", { class: "muted" },
      `${server.mcp_server_type} · ${server.server_url ?? [server.command, ...(server.args ?? [])].join(" ")}`)),
    h("div", { class: "actions" },
      h("button", { type: "button", onclick: show }, `List tools of ${server.server_name}`),
      h("button", { type: "button", class: "danger", onclick: remove }, `Remove ${server.server_name}`)),
    tools);
}

export async function mcpView(panel, agent) {
  const redraw = () => mcpView(panel, agent);
  const servers = await guard(() => api("GET", "/v1/mcp-servers")) ?? [];
  const kind = h("select", { id: "mcp-type" }, [["streamable_http", "Streamable HTTP"], ["sse", "SSE"],
    ["stdio", "stdio (a command)"]].map(([v, l]) => h("option", { value: v }, l)));
  const name = h("input", { id: "mcp-name" });
  const where = h("input", { id: "mcp-where", placeholder: "https://… or a command and its arguments" });
  const problem = h("div", { class: "form-error", role: "alert", tabindex: "-1", hidden: true });
  const tested = h("div", { id: "mcp-tested" });
  const form = h("form", { class: "settings-form", novalidate: true, "aria-labelledby": "mcp-title" },
    h("h3", { id: "mcp-title" }, "Add an MCP server"), problem,
    h("div", { class: "grid3" }, field("Name", name), field("Transport", kind),
      field("URL or command", where)),
    h("div", { class: "actions" }, h("button", { type: "button", onclick: () => test() }, "Test"),
      h("button", { type: "submit" }, "Add server")),
    tested);
  const stdio = () => kind.value === "stdio";
  const parts = () => where.value.trim().split(/\s+/).filter(Boolean);
  const locate = (path) => (path.includes("server_name") ? "mcp-name"
    : /server_url|command|args|config/.test(path) ? "mcp-where" : null);
  const refused = (error) => { say(error.message, true); showRefusal(form, error, locate, problem); };

  async function test() {
    clearErrors(form);
    const config = stdio() ? { server_name: name.value, type: "stdio", command: parts()[0] ?? "", args: parts().slice(1) }
      : { server_name: name.value, type: kind.value, server_url: where.value.trim() };
    clear(tested, h("p", { class: "muted" }, "Connecting…"));
    let answer;
    try { answer = await api("POST", "/v1/tools/mcp/servers/test", config); } catch (error) {
      clear(tested); refused(error); return;
    }
    clear(tested, h("p", { class: "good" }, `Connected: ${answer.tools.length} tools`),
      toolList(answer.tools, agent, "Tools found by the test"));
  }

  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    clearErrors(form);
    const config = stdio() ? { mcp_server_type: "stdio", command: parts()[0] ?? "", args: parts().slice(1) }
      : { mcp_server_type: kind.value, server_url: where.value.trim() };
    try {
      await api("POST", "/v1/mcp-servers", { server_name: name.value, config });
    } catch (error) { refused(error); return; }
    say(`Added ${name.value}`);
    redraw();
  });
  clear(panel, form, h("h3", {}, "MCP servers"),
    servers.length ? servers.map((s) => serverCard(s, agent, redraw)) : h("p", { class: "muted" }, "No MCP servers yet"));
}
