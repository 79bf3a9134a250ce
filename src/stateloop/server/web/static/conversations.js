// The agent's conversations: its threads listed, started, opened in the chat, forked and
// deleted.

import { api } from "./api.js";
import { clear, guard, h, say } from "./dom.js";
import { showTab } from "./app.js";
import { chooseThread, threadOf } from "./threads.js";

export async function conversationsView(panel, agent) {
  const redraw = () => conversationsView(panel, agent);
  const listed = await guard(() => api("GET", "/v1/conversations", undefined, { agent_id: agent.id, limit: 50 })) ?? [];
  const start = async () => {
    const made = await guard(() => api("POST", "/v1/conversations", {}, { agent_id: agent.id }));
    if (made) { say(`Started ${made.id}`); await redraw(); }
  };
  const rows = listed.map((c) => h("li", {},
    h("span", {}, h("code", {}, c.id), " ", h("small", { class: "muted" },
      `${c.summary ?? ""} ${c.created_at ? new Date(c.created_at).toLocaleString() : ""}`),
      threadOf(agent.id) === c.id ? h("small", { class: "good" }, " · in the chat") : null),
    h("span", { class: "actions" },
      h("button", { type: "button", "aria-label": `Open ${c.id} in the chat`,
        onclick: () => { chooseThread(agent.id, c.id); showTab("chat"); } }, "Open in chat"),
      h("button", { type: "button", "aria-label": `Fork ${c.id}`, onclick: async () => {
        const fork = await guard(() => api("POST", `/v1/conversations/${c.id}/fork`));
        if (fork) { say(`Forked ${c.id} as ${fork.id}`); await redraw(); }
      } }, "Fork"),
      h("button", { type: "button", class: "danger", "aria-label": `Delete ${c.id}`, onclick: async () => {
        if (!confirm(`Delete conversation ${c.id}?`)) return;
        if (await guard(() => api("DELETE", `/v1/conversations/${c.id}`)) === undefined) return;
        if (threadOf(agent.id) === c.id) chooseThread(agent.id, "");
        say(`Deleted ${c.id}`);
        await redraw();
      } }, "Delete"))));
  clear(panel, h("h3", {}, "Conversations"),
    h("p", { class: "muted" }, "Threads of this agent beside its own history: each has its messages and context, and shares the agent's memory."),
    h("button", { type: "button", onclick: start }, "Start a conversation"),
    h("ul", { class: "passages", "aria-label": "Conversations" }, rows.length ? rows : h("li", { class: "muted" }, "No conversations yet")));
}
