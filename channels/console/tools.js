// The MCP servers page: every server in mcp.json, which chats may use it, its state and tools.
// Values of env and headers never reach the browser: the API masks them. Below them, the skills (skills.js).

import { api } from "./api.js";
import { h, labelled, num } from "./dom.js";
import { skillsSection } from "./skills.js";

export async function renderTools(view) {
  const { servers } = await api("/api/mcp");
  const rows = servers.map((s) => h("tr", { dataset: { server: s.name } },
    h("td", {}, s.name),
    h("td", {}, h("code", {}, s.target)),
    h("td", {}, s.chats.join(", ")),
    h("td", { class: s.state === "ready" ? null : "error" }, s.state, s.last_error ? `: ${s.last_error}` : ""),
    h("td", { class: "n" }, num(s.tools.length)),
    h("td", {}, s.tools.join(", ") || "—")));
  const head = h("thead", {}, h("tr", {}, ["Server", "Runs", "Chats", "State", "#Tools", "Tool names"]
    .map((t) => h("th", { class: t.startsWith("#") ? "n" : null }, t.replace("#", "")))));
  const empty = servers.length ? null : h("p", { class: "muted" },
    "No MCP servers: declare them in mcp.json (see the README's \"MCP tools\").");
  view.replaceChildren(h("section", { class: "mcp-servers" }, h("h2", {}, "MCP servers"),
    servers.length ? labelled(h("table", { class: "chats" }, head, h("tbody", {}, rows))) : null, empty),
  await skillsSection());
}
