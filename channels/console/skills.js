// The Tools page's Skills section: every skill folder found, its source, offered or not and why.
// Descriptions and reasons are shown as text (dom.js never parses markup).

import { api } from "./api.js";
import { h, labelled, num } from "./dom.js";

export async function skillsSection() {
  const data = await api("/api/skills");
  const rows = data.skills.map((s) => h("tr", { dataset: { skill: s.name }, class: s.offered ? null : "not-offered" },
    h("td", {}, h("strong", {}, s.name), s.always ? " (always in force)" : "", h("div", { class: "muted" }, s.description)),
    h("td", {}, s.source),
    h("td", { class: s.offered ? null : "error" }, s.offered ? `offered to ${s.chats}${s.groups ? "" : " (not groups)"}`
      : `not offered: ${s.why_not}`),
    h("td", { class: "n" }, s.tokens ? num(s.tokens) : "—")));
  const head = h("thead", {}, h("tr", {}, ["Skill", "Source", "Offered", "#Tokens"]
    .map((t) => h("th", { class: t.startsWith("#") ? "n" : null }, t.replace("#", "")))));
  const summary = h("p", { class: "muted" }, data.skills.length
    ? `A chat that has every offered skill: ~${num(data.prompt_tokens)} tokens of system prompt `
      + `(TUSK_SKILLS_MAX_TOKENS ${num(data.max_tokens)}${data.past_cap ? `; ${data.past_cap} past it` : ""}).`
    : `No skills: drop a folder with a SKILL.md into ${data.roots[0]} (looked in: ${data.roots.join(", ")}).`);
  return h("section", { class: "skills" }, h("h2", {}, "Skills"), summary,
    data.skills.length ? labelled(h("table", { class: "chats" }, head, h("tbody", {}, rows))) : null);
}
