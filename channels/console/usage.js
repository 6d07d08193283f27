// The Usage page: what the model calls cost, day by day and chat by chat, against the spend limits.
//   the chart       daily cost or tokens stacked by chat (uPlot, uplot.js served by Tusk: no CDN); tokens
//                   when no call of the period has a known price (a cost chart would be empty), and either
//                   at a click
//   the tables      the top chats and people of the period
//   the limits      today's spend against each limit set; a chat's own daily limit, set or cleared

import { api } from "./api.js";
import { h, labelled, num } from "./dom.js";

const COLORS = ["#0f766e", "#2563eb", "#d97706", "#9333ea", "#dc2626", "#0891b2", "#65a30d", "#db2777", "#78716c"];

const usd = (v) => (v === null || v === undefined ? "unknown"
  : `$${v >= 10 || Math.abs(v * 100 - Math.round(v * 100)) < 1e-9 ? v.toFixed(2) : v.toFixed(4)}`);

const budgetPath = (channel, chat) => `/api/budgets/${encodeURIComponent(channel)}/${encodeURIComponent(chat)}`;

const short = (v) => (v >= 1e6 ? `${+(v / 1e6).toFixed(1)}M` : v >= 1e3 ? `${+(v / 1e3).toFixed(1)}k` : `${v}`);

// What the chart can stack: each day's cost (null: every call of it had an unknown price) or its tokens.
const MEASURES = {
  cost: { title: "Daily cost by chat", label: "Cost", of: (s) => s.cost_usd, axis: (v) => `$${v}`, value: usd },
  tokens: { title: "Daily tokens by chat (input + output)", label: "Tokens", of: (s) => s.tokens, axis: short,
    value: (v) => `${num(v ?? 0)} tokens` },
};

// Stacked bars without a plugin: series k is drawn at the sum of the chats 0..k, the tallest first,
// so each chat's colour shows between its own sum and the one below; the legend shows its own figure.
function chart(page, width, measure) {
  const m = MEASURES[measure];
  const own = page.series.map((s) => m.of(s).map((v) => v ?? 0));
  const sums = own.map((_, k) => page.days.map((_, i) => own.slice(0, k + 1).reduce((t, s) => t + s[i], 0) || null));
  const order = own.map((_, k) => k).reverse();
  const bars = uPlot.paths.bars({ size: [0.7, 48] });
  const opts = {
    width, height: 280,
    scales: { x: { time: false, range: [-0.5, page.days.length - 0.5] } },
    axes: [
      { values: (u, splits) => splits.map((i) => (Number.isInteger(i) && page.days[i] ? page.days[i].slice(5) : "")) },
      { values: (u, splits) => splits.map(m.axis), size: 60 },
    ],
    legend: { live: true },
    series: [{ label: "day", value: (u, i) => (i === null ? "" : page.days[i] ?? "") },
      ...order.map((k) => ({
        label: page.series[k].chat, stroke: COLORS[k % COLORS.length], fill: COLORS[k % COLORS.length],
        paths: bars, points: { show: false },
        value: (u, v, si, i) => (i === null ? "" : m.value(m.of(page.series[k])[i])),
      }))],
  };
  const box = h("div", { class: "usage-chart", dataset: { measure } });
  box.chart = new uPlot(opts, [page.days.map((_, i) => i), ...order.map((k) => sums[k])], box);
  return box;
}

// The chart with its title, a note on unknown prices, and the Cost / Tokens switch. Tokens are shown first
// when no call of the period has a known price: the cost chart would be empty.
function chartSection(page, section) {
  const priced = page.series.some((s) => s.cost_usd.some((v) => v > 0));
  const unpriced = page.series.some((s) => s.cost_usd.some((v, i) => v === null && s.calls[i] > 0));
  const slot = h("div", { class: "chart-slot" });
  const title = h("h3", {});
  const note = h("p", { class: "muted chart-note" });
  const buttons = Object.entries(MEASURES).map(([name, m]) => h("button", { type: "button", dataset: { measure: name },
    onclick: () => show(name) }, m.label));
  const show = (measure) => {
    title.textContent = MEASURES[measure].title;
    for (const b of buttons) b.setAttribute("aria-pressed", String(b.dataset.measure === measure));
    note.textContent = measure === "tokens" && !priced
      ? "No model called in this period has a known price, so the chart shows tokens."
      : measure === "cost" && unpriced ? "Calls to models without a known price are not in the cost: "
        + "Tokens shows them." : "";
    slot.replaceChildren(chart(page, Math.max(240, Math.min(section.clientWidth, 1060)), measure));
  };
  const box = h("div", { class: "chart-box" }, title,
    h("div", { class: "buttons measure", role: "group", "aria-label": "Chart shows" }, buttons), note, slot);
  return { box, show: () => show(priced ? "cost" : "tokens") };
}

function table(rows, key, title) {
  if (!rows.length) return h("p", { class: "muted" }, `No ${title.toLowerCase()} in this period.`);
  const head = h("thead", {}, h("tr", {}, [title, "#Calls", "#Input", "#Output", "#Cost"]
    .map((t) => h("th", { class: t.startsWith("#") ? "n" : null }, t.replace("#", "")))));
  return labelled(h("table", { class: `chats top-${key}` }, head, h("tbody", {}, rows.map((r) => h("tr", {},
    h("td", {}, r[key]), h("td", { class: "n" }, num(r.calls)), h("td", { class: "n" }, num(r.input_tokens)),
    h("td", { class: "n" }, num(r.output_tokens)),
    h("td", { class: "n" }, usd(r.cost_usd) + (r.unknown_price_calls && r.cost_usd !== null
      ? ` + ${r.unknown_price_calls} unknown` : "")))))));
}

const LABELS = { owner_daily: "Everyone today", owner_monthly: "Everyone this month",
  owner_daily_tokens: "Everyone today (tokens of unknown-price models)", chat_daily: "Chat", person_daily: "Person" };

function standings(rows) {
  if (!rows.length) {
    return h("p", { class: "muted" }, "No spend limit is set (TUSK_LIMIT_DAILY_USD, TUSK_LIMIT_MONTHLY_USD, "
      + "TUSK_CHAT_LIMIT_DAILY_USD, TUSK_PERSON_LIMIT_DAILY_USD, or a chat's own limit below).");
  }
  const figure = (s, v) => (s.unit === "tokens" ? `${num(v)} tokens` : usd(v));
  return h("ul", { class: "standings" }, rows.map((s) => h("li", { class: s.reached ? "reached" : null },
    h("span", {}, s.limit.startsWith("owner") ? LABELS[s.limit] : `${LABELS[s.limit]} ${s.who} today`,
      s.override ? " (its own limit)" : "", `: ${figure(s, s.spent)} of ${figure(s, s.limit_value)}`,
      s.reached ? " — reached" : ""),
    h("meter", { min: "0", max: String(s.limit_value || 1), value: String(s.spent),
      high: String(s.limit_value * 0.8), optimum: "0" }))));
}

function budgetForm(refresh) {
  const chat = h("input", { name: "chat", placeholder: "telegram:-100123", required: true, "aria-label": "Chat (CHANNEL:ID)" });
  const amount = h("input", { name: "usd", type: "number", min: "0", step: "any", placeholder: "USD a day",
    "aria-label": "Daily limit in USD" });
  const result = h("p", { class: "muted budget-result" });
  const send = async (method) => {
    const [channel, ...id] = chat.value.trim().split(":");
    if (!channel || !id.join(":")) throw new Error("Write the chat as CHANNEL:ID, as the tables show it.");
    const body = method === "PUT" ? { daily_usd: Number(amount.value) } : undefined;
    const b = await api(budgetPath(channel, id.join(":")), { method, body });
    result.textContent = b.daily_usd === null
      ? `${b.chat} has the default daily limit (${b.default_daily_usd === null ? "none" : usd(b.default_daily_usd)}).`
      : `${b.chat} may spend ${usd(b.daily_usd)} a day.`;
    await refresh();
  };
  const run = (method) => async (event) => {
    event.preventDefault();
    result.className = "muted budget-result";
    try {
      await send(method);
    } catch (err) {
      result.className = "error budget-result";
      result.textContent = err.message;
    }
  };
  return h("form", { class: "budget-form", onsubmit: run("PUT") },
    h("h3", {}, "A chat's own daily limit"),
    h("p", { class: "muted" }, "Overrides TUSK_CHAT_LIMIT_DAILY_USD for one chat (0 stops it); "
      + "a running Tusk applies it at once, like `tusk budget set`."),
    h("div", { class: "buttons" }, chat, amount, h("button", { type: "submit" }, "Set"),
      h("button", { type: "button", onclick: run("DELETE") }, "Clear")), result);
}

export async function renderUsage(view, days = 30) {
  const page = await api(`/api/usage?days=${days}`);
  const limits = h("div", { class: "standings-slot" }, standings(page.standings));
  const refresh = async () => limits.replaceChildren(standings((await api(`/api/usage?days=${days}`)).standings));
  const section = h("section", { class: "usage-page" }, h("h2", {}, `Usage, last ${days} days`),
    h("p", { class: "muted" }, `Days in ${page.zone}. Costs of calls to models without a known price are not in `
      + "the figures: those calls are counted, never priced at $0."));
  view.replaceChildren(section);
  if (page.series.length) {
    const drawn = chartSection(page, section);
    section.append(drawn.box);
    drawn.show();
  } else {
    section.append(h("p", { class: "muted empty" }, "No model calls in this period."));
  }
  section.append(h("h3", {}, "Today against the limits"), limits, budgetForm(refresh),
    h("div", { class: "tops" }, h("div", {}, h("h3", {}, "Top chats"), table(page.top_chats, "chat", "Chat")),
      h("div", {}, h("h3", {}, "Top people"), table(page.top_people, "person", "Person"))));
}
