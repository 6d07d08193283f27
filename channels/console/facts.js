// The Facts tab: each fact line of MEMORY.md; a click shows where it came from (the messages quoted,
// dated, with who said them; the summary; remember; the owner's edit) and offers "Forget this fact"
// (out of MEMORY.md as a new version, kept out of later consolidations: docs/memory.md).

import { api } from "./api.js";
import { h, when } from "./dom.js";

function sourceItem(s) {
  if (s.kind === "history") return h("li", {}, "From the summary of ", s.text);
  if (s.kind === "owner") return h("li", {}, `Written by the owner in the console, ${when(s.ts)}`);
  const who = s.sender_name || s.sender_id || "someone";
  const how = s.kind === "remember" ? `Saved with remember, asked by ${who}` : `${who} said`;
  return h("li", {}, `${how}, ${when(s.ts)}: `, h("q", {}, s.text));
}

async function showSources(ctx, line, slot) {
  const data = await api(`${ctx.base}/memory/why?fact=${encodeURIComponent(line)}`);
  const fact = data.facts.find((f) => f.line === line) || data.facts[0];
  if (!fact) {
    slot.replaceChildren(h("p", { class: "muted" }, "This fact is no longer in MEMORY.md."));
    return;
  }
  const forget = h("button", {
    type: "button",
    class: "danger",
    onclick: async () => {
      forget.disabled = true;
      await api(`${ctx.base}/memory/forget`, { method: "POST", body: { number: fact.number } });
      await renderFacts(ctx);
    },
  }, "Forget this fact");
  slot.replaceChildren(h("div", { class: "fact-sources" },
    fact.sources.length ? h("ul", {}, fact.sources.map(sourceItem))
      : h("p", { class: "muted" }, "No record of where this came from (it predates the links)."),
    forget));
}

export async function renderFacts(ctx) {
  const memory = await api(`${ctx.base}/memory`);
  const lines = memory.text.split("\n").map((l) => l.trim()).filter((l) => l && !l.startsWith("#"));
  const items = lines.map((line) => {
    const slot = h("div", {});
    const button = h("button", { type: "button", class: "fact", onclick: () => showSources(ctx, line, slot) }, line);
    return h("li", {}, button, slot);
  });
  ctx.panel.replaceChildren(h("div", { class: "facts" },
    h("p", { class: "muted" }, lines.length ? "Click a fact to see where it came from."
      : "MEMORY.md holds no facts yet."), h("ol", {}, items)));
}
