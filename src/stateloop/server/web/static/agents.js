// The list of agents: searched by the server, a page at a time, each entry telling its agent
// apart from others of the same name by the end of its id and the time it was made.

import { api } from "./api.js";
import { clear, guard, h } from "./dom.js";

export const PAGE = 50;

// agents: null until the first page arrives (loading is not "no agents")
const state = { agents: null, more: false, query: "", current: null, choose: () => {} };
let list, moreButton, typing;

/** Fill ``nav`` with the search field, ``actions``, the list and ``after`` it; ``choose(id)``
 * opens one. */
export function agentList(nav, actions, choose, after) {
  state.choose = choose;
  const search = h("input", { id: "agent-search", type: "search", placeholder: "Search (/)",
    oninput: (e) => {  // the server searches; one call once typing pauses
      state.query = e.target.value;
      clearTimeout(typing);
      typing = setTimeout(loadAgents, 150);
    } });
  list = h("ul", { class: "agent-list" });
  moreButton = h("button", { type: "button", hidden: true, onclick: () => loadAgents(true) },
    "More agents");
  clear(nav, h("label", { for: "agent-search" }, "Search agents"), search, actions, list, moreButton, after);
  return search;
}

/** The first page again (``more``: the next page after those listed). */
export async function loadAgents(more = false) {
  const after = more ? state.agents?.at(-1)?.id : undefined;
  const page = await guard(() => api("GET", "/v1/agents", undefined,
    { query_text: state.query, limit: PAGE, after, include: "agent.tags" }));
  if (page) {
    state.agents = more ? [...(state.agents ?? []), ...page] : page;
    state.more = page.length === PAGE;
  }
  state.agents ??= [];
  showAgents();
  return state.agents;
}

export function markCurrent(id) { state.current = id; showAgents(); }

function showAgents() {
  const shown = state.agents ?? [];
  clear(list, shown.map((a) => h("li", {},
    h("button", { type: "button", class: "agent", "aria-current": a.id === state.current ? "true" : null,
      onclick: () => state.choose(a.id) }, h("span", {}, a.name), note(a), who(a)))));
  if (!shown.length) list.append(h("li", { class: "muted" }, state.agents === null ? "Loading agents…"
    : state.query ? "No match" : "No agents yet"));
  moreButton.hidden = !state.more;
}

/** The model under an agent's name; for a stored record the server cannot read, a warning
 * that names what is wrong (opening it shows the server's message). */
function note(agent) {
  const error = agent.metadata?.error;
  if (error?.type !== "unreadable_record") return h("small", {}, agent.model);
  return h("small", { class: "bad", title: error.message }, "cannot be read");
}

/** The end of the id and the time made; for a name another listed agent has too, that said. */
export function idSuffix(id) { return `…${id.slice(-8)}`; }

export function madeAt(agent) {
  return agent.created_at ? new Date(agent.created_at).toLocaleString([],
    { dateStyle: "short", timeStyle: "medium" }) : "";
}

function who(agent) {
  const same = (state.agents ?? []).filter((a) => a.name === agent.name).length;
  return h("small", { class: "agent-id", title: agent.id },
    same > 1 ? `${same} named so · ` : "", `${idSuffix(agent.id)} · ${madeAt(agent)}`);
}
