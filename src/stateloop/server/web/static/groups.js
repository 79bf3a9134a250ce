// Groups and identities: the groups the agent is in (members, a message sent to the whole
// group and who answered), a group made from listed agents; identities made, attached to the
// agent and detached.

import { api } from "./api.js";
import { clear, guard, h, say } from "./dom.js";
import { refreshAgent, current } from "./app.js";

function text(content) {
  return typeof content === "string" ? content : (content || []).map((p) => p.text ?? "").join("");
}

function groupCard(group, names) {
  const input = h("input", { id: `group-say-${group.id}` });
  const answers = h("ol", { class: "ctx-messages", "aria-label": `Answers in ${group.id}` });
  const send = async (e) => {
    e.preventDefault();
    if (!input.value.trim()) return;
    const body = { messages: [{ role: "user", content: input.value.trim() }] };
    input.value = "";
    const answer = await guard(() => api("POST", `/v1/groups/${group.id}/messages`, body));
    if (!answer) return;
    clear(answers, answer.messages.filter((m) => m.message_type === "assistant_message").map((m) =>
      h("li", {}, h("strong", {}, names.get(m.sender_id ?? m.agent_id) ?? m.sender_id ?? m.agent_id ?? "agent"), ": ",
        text(m.content))));
  };
  return h("section", { class: "card", "aria-label": `Group ${group.id}` },
    h("h4", {}, group.description || group.id, " ", h("small", { class: "muted" }, group.manager_type)),
    h("p", {}, "Members: ", (group.agent_ids ?? []).map((id) => names.get(id) ?? id).join(", ")),
    h("form", { class: "row", onsubmit: send }, h("label", { for: input.id }, "Message to the group"),
      input, h("button", { type: "submit" }, "Send to group")),
    answers);
}

export async function groupsView(panel, agent) {
  const [groups, agents] = await Promise.all([guard(() => api("GET", `/v1/agents/${agent.id}/groups`)),
    guard(() => api("GET", "/v1/agents", undefined, { limit: 50, include: "agent.tags" }))]);
  const names = new Map((agents ?? []).map((a) => [a.id, `${a.name} (…${a.id.slice(-8)})`]));
  names.set(agent.id, `${agent.name} (this agent)`);
  const about = h("input", { id: "group-about" });
  const pick = (agents ?? []).filter((a) => a.id !== agent.id).map((a) => h("label", { class: "check" },
    h("input", { type: "checkbox", name: "member", value: a.id }), names.get(a.id)));
  const make = async (e) => {
    e.preventDefault();
    const ids = [agent.id, ...[...panel.querySelectorAll("input[name=member]:checked")].map((b) => b.value)];
    const body = { agent_ids: ids, description: about.value || undefined,
      manager_config: { manager_type: "round_robin" } };
    if (await guard(() => api("POST", "/v1/groups", body))) { say("Made the group"); groupsView(panel, agent); }
  };
  clear(panel, h("h3", {}, "Groups"),
    (groups ?? []).length ? groups.map((g) => groupCard(g, names)) : h("p", { class: "muted" }, "This agent is in no group"),
    h("form", { onsubmit: make, "aria-labelledby": "group-new" }, h("h4", { id: "group-new" }, "A new group with this agent"),
      h("label", { for: "group-about" }, "Description"), about,
      h("fieldset", {}, h("legend", {}, "Other members (round robin)"), pick.length ? pick : h("p", { class: "muted" }, "No other agents")),
      h("button", { type: "submit" }, "Make group")));
}

export async function identitiesView(panel, agent) {
  agent = current() ?? agent;
  const all = await guard(() => api("GET", "/v1/identities", undefined, { limit: 100 })) ?? [];
  const mine = new Set(agent.identity_ids ?? (agent.identities ?? []).map((i) => i.id));
  const key = h("input", { id: "identity-key" });
  const name = h("input", { id: "identity-name" });
  const kind = h("select", { id: "identity-type" }, ["user", "org", "other"].map((t) => h("option", { value: t }, t)));
  const make = async (e) => {
    e.preventDefault();
    const made = await guard(() => api("POST", "/v1/identities",
      { identifier_key: key.value.trim(), name: name.value.trim(), identity_type: kind.value }));
    if (made) { say(`Made identity ${made.name}`); identitiesView(panel, agent); }
  };
  const toggle = async (identity) => {
    const verb = mine.has(identity.id) ? "detach" : "attach";
    if (await guard(() => api("PATCH", `/v1/agents/${agent.id}/identities/${verb}/${identity.id}`)) === undefined) return;
    say(`${verb === "attach" ? "Attached" : "Detached"} ${identity.name}`);
    await refreshAgent();
    identitiesView(panel, current());
  };
  clear(panel, h("h3", {}, "Identities"),
    h("ul", { class: "passages", "aria-label": "Identities" }, all.length ? all.map((i) => h("li", {},
      h("span", {}, h("strong", {}, i.name), ` · ${i.identity_type} · ${i.identifier_key}`,
        mine.has(i.id) ? h("small", { class: "good" }, " · attached") : null),
      h("button", { type: "button", onclick: () => toggle(i) },
        `${mine.has(i.id) ? "Detach" : "Attach"} ${i.name}`))) : h("li", { class: "muted" }, "No identities yet")),
    h("form", { onsubmit: make, "aria-labelledby": "identity-new" }, h("h4", { id: "identity-new" }, "A new identity"),
      h("div", { class: "grid3" },
        h("div", {}, h("label", { for: "identity-key" }, "Identifier key"), key),
        h("div", {}, h("label", { for: "identity-name" }, "Name"), name),
        h("div", {}, h("label", { for: "identity-type" }, "Type"), kind)),
      h("button", { type: "submit" }, "Make identity")));
}
