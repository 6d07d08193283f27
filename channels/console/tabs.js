// One chat's memory, tab by tab: MEMORY.md (rendered, editable), its facts and their sources (facts.js),
// its versions (diff, restore),
// HISTORY.md (search), the session (with the consolidation pointer), its reminders (reminders.js) and Forget.
// Each tab is { title, render(ctx) }; ctx = { base, channel, chatId, panel, refresh(), show(name) }.

import { api } from "./api.js";
import { renderFacts } from "./facts.js";
import { renderChatReminders } from "./reminders.js";
import { bytes, h, num, setFlash, when } from "./dom.js";
import { markdown } from "./markdown.js";

function memoryView(ctx, memory, note) {
  const edit = h("button", { type: "button", onclick: () => memoryEditor(ctx, memory) }, "Edit");
  const cap = memory.max_tokens ? ` of ${num(memory.max_tokens)}` : "";
  ctx.panel.replaceChildren(h("div", { class: "memory" },
    note ? h("p", { class: "note" }, note) : null,
    h("p", { class: "muted" }, `MEMORY.md: ${num(memory.tokens)}${cap} tokens. `, edit),
    memory.text.trim() ? markdown(memory.text) : h("p", { class: "muted empty" },
      "Nothing remembered yet: facts are saved here as the conversation grows, or write some with Edit.")));
}

function memoryEditor(ctx, memory) {
  const area = h("textarea", { class: "memory-editor", rows: 16, "aria-label": "MEMORY.md", value: memory.text });
  const problem = h("p", { class: "error", hidden: true });
  const save = h("button", { type: "submit" }, "Save");
  const form = h("form", {
    class: "memory-edit",
    onsubmit: async (event) => {
      event.preventDefault();
      save.disabled = true;
      try {
        const saved = await api(`${ctx.base}/memory`, { method: "PUT", body: { text: area.value, etag: memory.etag } });
        memoryView(ctx, saved, `Saved. The previous text is kept as a version (${saved.versions} kept).`);
        await ctx.refresh();
      } catch (err) {
        problem.textContent = err.message;
        problem.hidden = false;
        save.disabled = false;
      }
    },
  }, h("p", { class: "muted" }, "Markdown. Saving replaces MEMORY.md atomically and keeps the old text as a version."),
  area, problem, h("div", { class: "buttons" }, save,
    h("button", { type: "button", onclick: () => memoryView(ctx, memory) }, "Cancel")));
  ctx.panel.replaceChildren(form);
  area.focus();
}

function diffView(lines) {
  if (!lines.some(([op]) => op !== " ")) return h("p", { class: "muted" }, "No change.");
  return h("pre", { class: "diff" }, lines.map(([op, line]) =>
    h("span", { class: { "+": "add", "-": "del", " ": "same" }[op] }, `${op} ${line}\n`)));
}

async function showVersion(ctx, name, slot) {
  const v = await api(`${ctx.base}/versions/${encodeURIComponent(name)}`);
  const restore = h("button", {
    type: "button",
    class: "restore",
    onclick: async () => {
      restore.disabled = true;
      await api(`${ctx.base}/versions/${encodeURIComponent(name)}/restore`, { method: "POST" });
      await ctx.refresh();
      await ctx.show("memory");
    },
  }, "Restore this version");
  slot.replaceChildren(h("div", { class: "version" },
    h("h4", {}, `The change made at ${when(v.replaced)}`), diffView(v.diff),
    h("h4", {}, "This version's text"), h("pre", { class: "version-text" }, v.text),
    h("p", {}, restore, h("span", { class: "muted" }, " (the current text is kept as a version too)"))));
}

async function renderVersions(ctx) {
  const { versions } = await api(`${ctx.base}/versions`);
  if (!versions.length) {
    ctx.panel.replaceChildren(h("p", { class: "muted" }, "No earlier versions: each change to MEMORY.md keeps the text it replaced here (the last 10)."));
    return;
  }
  const slot = h("div", { class: "version-slot" });
  ctx.panel.replaceChildren(h("ol", { class: "versions" }, versions.map((v) => h("li", {},
    h("button", { type: "button", class: "link", onclick: () => showVersion(ctx, v.name, slot) },
      `replaced ${when(v.replaced)}`), h("span", { class: "muted" }, ` ${bytes(v.bytes)}`)))), slot);
}

async function renderHistory(ctx) {
  const search = h("input", { type: "search", placeholder: "search the history", "aria-label": "Search history" });
  const list = h("ol", { class: "history" });
  const count = h("p", { class: "muted" });
  const fill = async () => {
    const data = await api(`${ctx.base}/history?q=${encodeURIComponent(search.value.trim())}`);
    count.textContent = search.value.trim() ? `${data.entries.length} of ${data.total} entries match.`
      : `${data.total} entries, newest first. Older conversation is summarised here, one dated entry per consolidation.`;
    list.replaceChildren(...data.entries.map((e) => h("li", {}, h("h4", {}, e.heading), markdown(e.text))));
  };
  let timer;
  search.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(fill, 150);
  });
  ctx.panel.replaceChildren(search, count, list);
  await fill();
}

function messageItem(m) {
  const calls = m.tool_calls.length ? ` called ${m.tool_calls.join(", ")}` : "";
  const who = m.role === "tool" ? `tool ${m.name ?? ""}` : m.role;
  return h("li", { class: `entry ${m.role}`, dataset: { index: String(m.index) } },
    h("span", { class: "who" }, `#${m.index} ${who} · ${when(m.ts)}${calls}`),
    h("div", { class: "plain" }, m.content ?? ""));
}

async function renderSession(ctx, before = null) {
  const data = await api(`${ctx.base}/session?limit=200${before === null ? "" : `&before=${before}`}`);
  const list = h("ol", { class: "session" });
  const pointer = h("li", { class: "pointer" }, data.last_consolidated
    ? `▲ ${num(data.last_consolidated)} messages consolidated (summarised into HISTORY.md and MEMORY.md) · `
      + "not yet consolidated, sent with every turn ▼"
    : "Nothing consolidated yet: every message below is sent with each turn ▼");
  for (const m of data.messages) {
    if (m.index === data.last_consolidated) list.append(pointer);
    list.append(messageItem(m));
  }
  if (data.last_consolidated >= data.start + data.messages.length) list.append(pointer);
  const earlier = data.start > 0
    ? h("button", { type: "button", onclick: () => renderSession(ctx, data.start) }, `Show earlier (${data.start} more)`) : null;
  ctx.panel.replaceChildren(h("div", {}, h("p", { class: "muted" },
    `Messages ${data.start + 1}–${data.start + data.messages.length} of ${data.total}.`), earlier, list));
}

async function renderForget(ctx) {
  const preview = await api(`${ctx.base}/forget`);
  if (!preview.items.length) {
    ctx.panel.replaceChildren(h("p", {}, preview.report));
    return;
  }
  const confirm = h("button", {
    type: "button",
    class: "danger",
    onclick: async () => {
      confirm.disabled = true;
      const done = await api(`${ctx.base}/forget`, { method: "POST", body: { confirm: true } });
      setFlash(h("div", { class: "note forget-report" }, h("pre", {}, done.report)));
      window.location.hash = "#/memory";
    },
  }, "Delete it all");
  ctx.panel.replaceChildren(h("div", { class: "forget" },
    h("p", {}, "Forget deletes everything Tusk keeps about this chat, as /forget does in the chat. This would delete:"),
    h("ul", { class: "forget-items" }, preview.items.map((item) => h("li", {}, item))),
    h("p", {}, confirm, " ", h("button", { type: "button", onclick: () => ctx.show("memory") }, "Cancel"))));
}

export const TABS = {
  memory: { title: "MEMORY.md", render: async (ctx) => memoryView(ctx, await api(`${ctx.base}/memory`)) },
  facts: { title: "Facts", render: renderFacts },
  versions: { title: "Versions", render: renderVersions },
  history: { title: "HISTORY.md", render: renderHistory },
  session: { title: "Session", render: renderSession },
  reminders: { title: "Reminders", render: renderChatReminders },
  forget: { title: "Forget…", render: renderForget },
};
