// The page: the chosen agent's header, its views in tabs with the conversation first, the
// agent beside them (side.js), login and shortcuts.

import { api, setPassword } from "./api.js";
import { clear, guard, h, say } from "./dom.js";
import { openCreate } from "./create.js";
import { chatView } from "./chat.js";
import { memoryView } from "./memory.js";
import { contextView } from "./context.js";
import { agentList, loadAgents, madeAt, markCurrent } from "./agents.js";
import { drawSide } from "./side.js";
import { exportAgent, importField } from "./agentfile.js";
import { runsView } from "./runs.js";
import { toolsView } from "./tools.js";
import { settingsView } from "./settings.js";
import { toolEditorView } from "./tooleditor.js";
import { filesView } from "./files.js";
import { mcpView } from "./mcp.js";
import { conversationsView } from "./conversations.js";
import { groupsView, identitiesView } from "./groups.js";
import { accessView, mayManageAccess } from "./access.js";

const TABS = [
  ["chat", "Chat", chatView], ["memory", "Memory", memoryView],
  ["context", "Context", contextView], ["runs", "Runs", runsView], ["tools", "Tools", toolsView],
  ["settings", "Settings", settingsView], ["editor", "Tool editor", toolEditorView],
  ["files", "Files", filesView], ["mcp", "MCP", mcpView], ["conversations", "Conversations", conversationsView],
  ["groups", "Groups", groupsView], ["identities", "Identities", identitiesView],
];

const state = { agent: null, tab: "chat" };

const main = document.getElementById("main");
const side = document.getElementById("side");
const search = agentList(document.getElementById("agents"),
  h("button", { type: "button", onclick: () => openCreate(created) }, "New agent (n)"), choose,
  importField(async (ids) => { await loadAgents(); if (ids.length) await choose(ids[0]); }));

async function created(agent) { await loadAgents(); await choose(agent.id); }

/** Make ``id`` the agent on screen. */
export async function choose(id) {
  const agent = await guard(() => api("GET", `/v1/agents/${id}`));
  if (!agent) return;
  state.agent = agent;
  history.replaceState(null, "", `#${id}`);
  markCurrent(id);
  render();
}

export function current() { return state.agent; }

/** After a step: the agent again (its blocks, pending approval) and the context bar. */
export async function refreshAgent() {
  if (!state.agent) return;
  const agent = await guard(() => api("GET", `/v1/agents/${state.agent.id}`));
  if (agent && agent.id === state.agent.id) state.agent = agent;
  drawSide(side, state.agent, () => showTab("settings"));
}

async function remove() {
  const agent = state.agent;
  if (!confirm(`Delete agent ${agent.name}? Its history and unshared blocks go too.`)) return;
  if (await guard(() => api("DELETE", `/v1/agents/${agent.id}`)) === undefined) return;
  say(`Deleted ${agent.name}`);
  state.agent = null;
  markCurrent(null);
  await loadAgents();
  render();
}

function render() {
  const agent = state.agent;
  drawSide(side, agent, () => showTab("settings"));
  if (!agent) { clear(main, h("p", { class: "muted" }, "Choose an agent, or create one.")); return; }
  const tabs = h("div", { role: "tablist", "aria-label": "Views" }, TABS.map(([key, label], i) =>
    h("button", { type: "button", role: "tab", id: `tab-${key}`, "aria-controls": "panel",
      "aria-selected": String(key === state.tab), tabindex: key === state.tab ? "0" : "-1",
      title: i < 9 ? `Alt+${i + 1}` : null, onclick: () => showTab(key) }, label)));
  tabs.addEventListener("keydown", (e) => {  // arrow keys move between tabs
    const step = { ArrowRight: 1, ArrowLeft: -1 }[e.key];
    if (!step) return;
    const i = TABS.findIndex(([k]) => k === state.tab);
    showTab(TABS[(i + step + TABS.length) % TABS.length][0]);
    document.getElementById(`tab-${state.tab}`).focus();
  });
  clear(main,
    h("div", { class: "agent-head" },
      h("h2", {}, agent.name), h("span", { class: "muted" }, agent.model),
      h("span", { class: "muted agent-id" }, agent.id), h("span", { class: "muted" }, madeAt(agent)),
      h("span", { class: "head-actions" },
        h("button", { type: "button", onclick: () => exportAgent(agent) }, "Export agent file"),
        h("button", { type: "button", class: "danger", onclick: remove }, "Delete agent"))),
    tabs,
    h("section", { id: "panel", role: "tabpanel", "aria-labelledby": `tab-${state.tab}` }));
  showTab(state.tab);
}

export function showTab(key) {
  state.tab = key;
  for (const [k] of TABS) {
    const tab = document.getElementById(`tab-${k}`);
    tab.setAttribute("aria-selected", String(k === key));
    tab.tabIndex = k === key ? 0 : -1;
  }
  const panel = document.getElementById("panel");
  panel.setAttribute("aria-labelledby", `tab-${key}`);
  panel.dataset.view = key;
  clear(panel);
  TABS.find(([k]) => k === key)[2](panel, state.agent);
}

document.addEventListener("keydown", (e) => {
  const typing = /INPUT|TEXTAREA|SELECT/.test(document.activeElement?.tagName || "");
  if (e.altKey && /^[1-9]$/.test(e.key) && TABS[+e.key - 1] && state.agent) { e.preventDefault(); showTab(TABS[+e.key - 1][0]); return; }
  if (typing || e.ctrlKey || e.metaKey || e.altKey) return;
  if (e.key === "/") { e.preventDefault(); search.focus(); }
  else if (e.key === "n") { e.preventDefault(); openCreate(created); }
});

/** The Access view (keys, tokens, usage, audit) in place of an agent: an admin's. */
async function showAccess() {
  state.agent = null;
  markCurrent(null);
  drawSide(side, null);
  history.replaceState(null, "", "#access");
  await accessView(main);
}
const accessButton = document.getElementById("access-open");
accessButton.addEventListener("click", showAccess);

const login = document.getElementById("login");
window.addEventListener("stateloop:login", () => {
  login.hidden = false;  // the failed call says why in the status line
  document.getElementById("password").focus();
});
login.addEventListener("submit", async (e) => {
  e.preventDefault();
  setPassword(document.getElementById("password").value);
  login.hidden = true;
  say("");
  await start();
});

async function start() {
  await loadAgents();
  accessButton.hidden = !(await mayManageAccess());
  const wanted = location.hash.slice(1);
  if (wanted.startsWith("agent-")) await choose(wanted);  // an agent past the first page too
  if (wanted === "access" && !accessButton.hidden) await showAccess();
  else if (!state.agent) render();
}

start();
