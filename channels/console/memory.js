// The memory browser: every chat across channels, and one chat's memory (tabs in tabs.js).

import { api, chatPath } from "./api.js";
import { bytes, h, labelled, num, takeFlash, when } from "./dom.js";
import { TABS } from "./tabs.js";

const chatHref = (c) => `#/memory/${encodeURIComponent(c.channel)}/${encodeURIComponent(c.chat_id)}`;

export async function renderMemoryList(view) {
  const body = h("tbody");
  const table = h("table", { class: "chats" });
  const empty = h("p", { class: "muted", hidden: true });
  const search = h("input", { type: "search", name: "q", placeholder: "search by chat id", "aria-label": "Search chats by id" });
  const fill = async () => {
    const { chats } = await api(`/api/chats?q=${encodeURIComponent(search.value.trim())}`);
    body.replaceChildren(...chats.map((c) => h("tr", { dataset: { chat: `${c.channel}:${c.chat_id}` } },
      h("td", {}, c.channel),
      h("td", {}, h("a", { href: chatHref(c) }, c.chat_id)),
      h("td", { class: "n" }, num(c.messages)),
      h("td", { class: "n" }, bytes(c.memory_bytes)),
      h("td", { class: "n" }, num(c.history_entries)),
      h("td", {}, when(c.last_active)))));
    labelled(table);
    empty.hidden = chats.length > 0;
    empty.textContent = search.value.trim() ? "No chat id matches." : "No chats yet: talk to Tusk in the Chat page or any platform.";
  };
  let timer;
  search.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(fill, 150);
  });
  const head = h("thead", {}, h("tr", {}, ["Channel", "Chat", "#Messages", "#MEMORY.md", "#History", "Last activity"]
    .map((t) => h("th", { class: t.startsWith("#") ? "n" : null }, t.replace("#", "")))));
  table.append(head, body);
  view.replaceChildren(h("section", { class: "memory-list" }, takeFlash(), h("h2", {}, "Every chat's memory"),
    search, table, empty));
  await fill();
}

function meter(value, max, low, high) {
  return h("meter", { min: "0", max: String(max), value: String(value), low: String(low), high: String(high),
    optimum: "0" });
}

function usage(chat) {
  const t = chat.tokens;
  const rows = [];
  if (t.limit) {
    rows.push(h("div", { class: "usage-row" },
      h("span", { class: "prompt-tokens" }, `Prompt ≈ ${num(t.prompt)} of ${num(t.limit)} tokens`),
      meter(t.prompt, t.limit, t.target, Math.round(t.limit * 0.9)),
      h("small", {}, `system prompt with MEMORY.md and tools ${num(t.system)} + unconsolidated messages ` +
        `${num(t.history)}; window ${num(t.window)}, ${num(t.reserve)} kept for the reply. ` +
        `Over ${num(t.limit)}, the oldest turns are summarised until the prompt is under ${num(t.target)}.`)));
  }
  rows.push(h("div", { class: "usage-row" },
    h("span", {}, `MEMORY.md ${num(t.memory)}${t.memory_max ? ` of ${num(t.memory_max)}` : ""} tokens`),
    t.memory_max ? meter(t.memory, t.memory_max, t.memory_max * 0.7, t.memory_max * 0.9) : null));
  if (chat.media && chat.media.files) {
    rows.push(h("p", { class: "media-usage" },
      `Files received: ${num(chat.media.files)} (${bytes(chat.media.bytes)} in media/; /forget deletes them).`));
  }
  const c = chat.consolidation;
  rows.push(h("p", { class: "muted" },
    `${num(chat.total)} messages, ${num(chat.last_consolidated)} of them consolidated; ` +
    `${num(chat.history_entries)} history entries; ${num(chat.versions)} earlier MEMORY.md versions. ` +
    (c ? `Consolidations since start: ${c.runs} (~${num(c.tokens_sent)} tokens), last ${when(c.last_run)}.` +
      (c.last_error ? ` Last problem: ${c.last_error}` : "") : "No consolidation since start.")));
  return h("section", { class: "usage" }, h("h3", {}, "Tokens"), rows);
}

export async function renderChatDetail(view, channel, chatId) {
  const base = chatPath(channel, chatId);
  const panel = h("div", { class: "tab-body" });
  const tabs = h("nav", { class: "tabs", role: "tablist" });
  const top = h("div", { class: "usage-slot" });
  const ctx = { base, channel, chatId, panel, refresh: null, show: null };
  ctx.refresh = async () => top.replaceChildren(usage(await api(base)));
  ctx.show = async (name) => {
    for (const b of tabs.children) b.setAttribute("aria-selected", String(b.dataset.tab === name));
    panel.replaceChildren(h("p", { class: "muted" }, "Loading…"));
    try {
      await TABS[name].render(ctx);
    } catch (err) {
      panel.replaceChildren(h("p", { class: "error" }, err.message));
    }
  };
  for (const [name, tab] of Object.entries(TABS)) {
    tabs.append(h("button", { type: "button", role: "tab", dataset: { tab: name }, onclick: () => ctx.show(name) }, tab.title));
  }
  const chatLink = channel === "http" ? h("a", { href: `#/chat/${encodeURIComponent(chatId)}` }, "Open in chat →") : null;
  await ctx.refresh();
  view.replaceChildren(h("section", { class: "chat-detail" },
    h("p", {}, h("a", { href: "#/memory" }, "← all chats")),
    h("h2", {}, h("span", { class: "channel" }, channel), " ", h("span", { class: "chat-id" }, chatId), " ", chatLink),
    top, tabs, panel));
  await ctx.show("memory");
}
