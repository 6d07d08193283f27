// Reminders, repeating schedules and check-ins (bot/ops/console_schedules.py): every chat's on the Reminders
// page, one chat's in its Reminders tab; each with its rule and next run, its runs (delivered, failed and
// why), and Pause / Resume / Cancel, the same actions as /reminders pause|resume|cancel in the chat.

import { api } from "./api.js";
import { h } from "./dom.js";

const KIND = { reminder: "once", text: "text", instruction: "instruction", checkin: "check-in" };

function runsList(s) {
  if (!s.runs.length) return h("p", { class: "muted" }, "No runs yet.");
  return h("ol", { class: "runs" }, s.runs.map((r) =>
    h("li", { class: r.status === "failed" ? "error" : null, dataset: { status: r.status } }, r.shown)));
}

function scheduleRow(s, refill) {
  const act = (label, path, method = "POST") => h("button", {
    type: "button",
    class: label === "Cancel" ? "danger" : null,
    onclick: async (event) => {
      event.target.disabled = true;
      try {
        await api(`/api/schedules/${encodeURIComponent(s.id)}${path}`, { method });
      } finally {
        await refill();
      }
    },
  }, label);
  const buttons = [];
  if (s.rule && !s.paused) buttons.push(act("Pause", "/pause"));
  if (s.rule && s.paused) buttons.push(act("Resume", "/resume"));
  if (s.kind !== "checkin" || s.due) buttons.push(act("Cancel", "", "DELETE"));
  const last = s.runs.find((r) => r.status !== "missed");
  const details = h("details", {}, h("summary", {}, `${s.runs.length} run(s)`), runsList(s));
  return h("tr", { dataset: { schedule: s.id } },
    h("td", {}, h("code", {}, s.id)),
    h("td", {}, `${s.channel}:${s.chat_id}`),
    h("td", {}, KIND[s.kind] || s.kind),
    h("td", {}, s.when, s.paused ? h("strong", { class: "paused" }, " (paused)") : null),
    h("td", {}, s.kind === "checkin" ? s.item : s.text, s.set_by ? h("span", { class: "muted" }, ` — ${s.set_by.name || s.set_by.id}`) : null),
    h("td", { class: last && last.status === "failed" ? "error" : null }, last ? last.shown : "—", details),
    h("td", { class: "buttons" }, buttons));
}

async function fill(slot, query) {
  const { schedules } = await api(`/api/schedules${query}`);
  if (!schedules.length) {
    slot.replaceChildren(h("p", { class: "muted empty" },
      "No reminders or schedules. Ask in a chat, e.g. \"every weekday at 8 tell me what's due\"."));
    return;
  }
  const head = h("thead", {}, h("tr", {}, ["Id", "Chat", "Kind", "When", "What", "Last run", ""].map((t) => h("th", {}, t))));
  const refill = () => fill(slot, query);
  slot.replaceChildren(h("table", { class: "chats schedules" }, head,
    h("tbody", {}, schedules.map((s) => scheduleRow(s, refill)))));
}

export async function renderReminders(view) {
  const slot = h("div", {});
  view.replaceChildren(h("section", { class: "reminders" }, h("h2", {}, "Reminders and schedules"),
    h("p", { class: "muted" }, "Every chat's, times in each chat's own time zone. A failed run is said once in its chat and shown here."),
    slot));
  await fill(slot, "");
}

export async function renderChatReminders(ctx) {
  const slot = h("div", {});
  ctx.panel.replaceChildren(slot);
  await fill(slot, `?channel=${encodeURIComponent(ctx.channel)}&chat_id=${encodeURIComponent(ctx.chatId)}`);
}
