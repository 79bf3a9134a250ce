// The page: the list of agents, the chosen agent's header and tabs, login and shortcuts.

import { api, setPassword } from "./api.js";
import { clear, guard, h, say } from "./dom.js";
import { openCreate } from "./create.js";
import { chatView } from "./chat.js";
import { memoryView } from "./memory.js";
import { contextBar, contextView } from "./context.js";
import { runsView } from "./runs.js";
import { toolsView } from "./tools.js";

const TABS = [
  ["chat", "Chat", chatView], ["memory", "Memory", memoryView],
  ["context", "Context", contextView], ["runs", "Runs", runsView], ["tools", "Tools", toolsView],
];

// agents: null until the first list arrives (loading is not "no agents")
const state = { agents: null, agent: null, tab: "chat", query: "" };

const nav = document.getElementById("agents");
const main = document.getElementById("main");
const search = h("input", { id: "agent-search", type: "search", placeholder: "Search (/)",
  oninput: (e) => { state.query = e.target.value; listAgents(); } });
const list = h("ul", { class: "agent-list" });
clear(nav, h("label", { for: "agent-search" }, "Search agents"), search,
  h("button", { type: "button", onclick: () => openCreate(created) }, "New agent (n)"), list);

async function loadAgents() {
  state.agents = await guard(() => api("GET", "/v1/agents", undefined,
    { query_text: state.query, limit: 200 })) ?? state.agents ?? [];
  listAgents();
}

function listAgents() {
  const q = state.query.toLowerCase();
  const shown = (state.agents ?? []).filter((a) => !q || a.name.toLowerCase().includes(q) || a.id.includes(q));
  clear(list, shown.map((a) => h("li", {},
    h("button", { type: "button", class: "agent", "aria-current": a.id === state.agent?.id ? "true" : null,
      onclick: () => choose(a.id) }, h("span", {}, a.name), note(a), shared(a)))));
  if (!shown.length) list.append(h("li", { class: "muted" }, state.agents === null ? "Loading agents…"
    : state.agents.length ? "No match" : "No agents yet"));
}

/** The model under an agent's name; for a stored record the server cannot read, a warning
 * that names what is wrong (opening it shows the server's message). */
function note(agent) {
  const error = agent.metadata?.error;
  if (error?.type !== "unreadable_record") return h("small", {}, agent.model);
  return h("small", { class: "bad", title: error.message }, "cannot be read");
}

/** For an agent whose name another agent has too: that said, and its id, to tell them apart. */
function shared(agent) {
  const same = (state.agents ?? []).filter((a) => a.name === agent.name).length;
  if (same < 2) return null;
  return h("small", { class: "agent-id", title: `${same} agents are named ${agent.name}` },
    `${same} named so · ${agent.id}`);
}

async function created(agent) { await loadAgents(); await choose(agent.id); }

/** Make ``id`` the agent on screen. */
export async function choose(id) {
  const agent = await guard(() => api("GET", `/v1/agents/${id}`));
  if (!agent) return;
  state.agent = agent;
  history.replaceState(null, "", `#${id}`);
  listAgents();
  render();
}

export function current() { return state.agent; }

/** After a step: the agent again (its blocks, pending approval) and the context bar. */
export async function refreshAgent() {
  if (!state.agent) return;
  const agent = await guard(() => api("GET", `/v1/agents/${state.agent.id}`));
  if (agent && agent.id === state.agent.id) state.agent = agent;
  contextBar(document.getElementById("bar"), state.agent);
}

async function remove() {
  const agent = state.agent;
  if (!confirm(`Delete agent ${agent.name}? Its history and unshared blocks go too.`)) return;
  if (await guard(() => api("DELETE", `/v1/agents/${agent.id}`)) === undefined) return;
  say(`Deleted ${agent.name}`);
  state.agent = null;
  await loadAgents();
  render();
}

function render() {
  const agent = state.agent;
  if (!agent) { clear(main, h("p", { class: "muted" }, "Choose an agent, or create one.")); return; }
  const tabs = h("div", { role: "tablist", "aria-label": "Views" }, TABS.map(([key, label], i) =>
    h("button", { type: "button", role: "tab", id: `tab-${key}`, "aria-controls": "panel",
      "aria-selected": String(key === state.tab), tabindex: key === state.tab ? "0" : "-1",
      title: `Alt+${i + 1}`, onclick: () => showTab(key) }, label)));
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
      h("span", { class: "muted agent-id" }, agent.id),
      h("button", { type: "button", class: "danger", onclick: remove }, "Delete agent")),
    h("div", { id: "bar", class: "bar-wrap" }), tabs,
    h("section", { id: "panel", role: "tabpanel", "aria-labelledby": `tab-${state.tab}` }));
  contextBar(document.getElementById("bar"), agent);
  showTab(state.tab);
}

function showTab(key) {
  state.tab = key;
  for (const [k] of TABS) {
    const tab = document.getElementById(`tab-${k}`);
    tab.setAttribute("aria-selected", String(k === key));
    tab.tabIndex = k === key ? 0 : -1;
  }
  const panel = document.getElementById("panel");
  panel.setAttribute("aria-labelledby", `tab-${key}`);
  clear(panel);
  TABS.find(([k]) => k === key)[2](panel, state.agent);
}

document.addEventListener("keydown", (e) => {
  const typing = /INPUT|TEXTAREA|SELECT/.test(document.activeElement?.tagName || "");
  if (e.altKey && /^[1-5]$/.test(e.key) && state.agent) { e.preventDefault(); showTab(TABS[+e.key - 1][0]); return; }
  if (typing || e.ctrlKey || e.metaKey || e.altKey) return;
  if (e.key === "/") { e.preventDefault(); search.focus(); }
  else if (e.key === "n") { e.preventDefault(); openCreate(created); }
});

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
  const wanted = location.hash.slice(1);
  if (wanted && state.agents?.some((a) => a.id === wanted)) await choose(wanted);
  else render();
}

start();
