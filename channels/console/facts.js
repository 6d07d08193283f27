// The Facts tab: each fact line of MEMORY.md, numbered as /memory forget numbers them, under its `## `
// section; shown as a reader wants it: no list marker, its Markdown rendered, and the `[asked by Ann, id 7]`
// note that `remember` keeps beside a fact as a label ("asked by Ann"). A click shows where it came from
// (the messages quoted, dated, with who said them; the summary; remember; the owner's edit) and offers
// "Forget this fact" (out of MEMORY.md as a new version, kept out of later consolidations: docs/memory.md).

import { api } from "./api.js";
import { h, when } from "./dom.js";
import { inline } from "./markdown.js";

const BULLET = /^\s*(?:[-*+]|\d+[.)])\s+/;  // as memory/provenance.py reads a fact line
const ASKED_BY = /\s*\[asked by ([^\]]*)\]\s*$/;

// A fact line as parts: its text, and who asked for it to be kept ({name, id}, or null).
export function factParts(line) {
  const text = line.replace(BULLET, "");
  const note = ASKED_BY.exec(text);
  if (!note) return { text: text.trim(), asker: null };
  const who = /^(?:(.*), )?id (.+)$/.exec(note[1].trim());
  const asker = who ? { name: who[1] || "", id: who[2] } : { name: note[1].trim(), id: "" };
  return { text: text.slice(0, note.index).trim(), asker };
}

function askerLabel(asker) {
  const name = asker.name || `id ${asker.id}`;
  return h("span", { class: "asker", title: asker.id && asker.name ? `${asker.name} (id ${asker.id})` : null },
    `asked by ${name}`);
}

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
  const groups = [];  // [{section, facts: [{line, number}]}]: the facts under each `## ` heading, in order
  let number = 0;
  for (const raw of memory.text.split("\n")) {
    const line = raw.trim();
    if (line.startsWith("#")) {
      if (line.startsWith("## ")) groups.push({ section: line.replace(/^#+\s*/, ""), facts: [] });
      continue;
    }
    if (!/\w/u.test(line)) continue;  // a blank line or a rule is no fact (memory/provenance.py `facts`)
    if (!groups.length) groups.push({ section: "", facts: [] });
    groups.at(-1).facts.push({ line, number: ++number });
  }
  const lists = groups.filter((g) => g.facts.length).map((g) => [
    g.section ? h("h4", { class: "fact-section" }, g.section) : null,
    h("ol", { start: String(g.facts[0].number) }, g.facts.map(({ line, number: n }) => {
      const { text, asker } = factParts(line);
      const slot = h("div", {});
      const button = h("button", { type: "button", class: "fact", onclick: () => showSources(ctx, line, slot) },
        h("span", { class: "fact-text" }, inline(text)), asker ? askerLabel(asker) : null);
      return h("li", { value: String(n) }, button, slot);
    }))]);
  ctx.panel.replaceChildren(h("div", { class: "facts" },
    h("p", { class: "muted" }, number ? "Click a fact to see where it came from; the numbers are the ones "
      + "/memory forget takes." : "MEMORY.md holds no facts yet."), lists));
}
