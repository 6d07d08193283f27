// Building DOM nodes without HTML parsing: text always goes in as text nodes, never as markup.

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "class") el.className = value;
    else if (key === "dataset") Object.assign(el.dataset, value);
    else if (key === "value") el.value = value;  // a textarea's text is its value, not an attribute
    else if (typeof value !== "string" && key in el) el[key] = value;  // hidden, disabled, value, ...
    else el.setAttribute(key, value === true ? "" : value);
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of [children].flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));  // a string becomes a text node
  }
  return el;
}

export function when(ts) {
  if (!ts) return "—";
  const d = new Date(ts * 1000);
  const pad = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

export function bytes(n) {
  if (n < 1024) return `${n} B`;
  return n < 1024 * 1024 ? `${(n / 1024).toFixed(1)} KB` : `${(n / 1024 / 1024).toFixed(1)} MB`;
}

export const num = (n) => (n ?? 0).toLocaleString("en-US");

// Each body cell of a table gets its column's heading as `data-label`: on a narrow screen (console.css) the
// rows stack, each cell on a line of its own under that label, so no column is cut off at the side.
export function labelled(table) {
  const labels = [...table.querySelectorAll("thead th")].map((th) => th.textContent);
  for (const row of table.querySelectorAll("tbody tr")) {
    [...row.children].forEach((cell, i) => cell.setAttribute("data-label", labels[i] ?? ""));
  }
  return table;
}

let flash = null;  // a note for the next page shown (the report of a forget)

export function setFlash(node) {
  flash = node;
}

export function takeFlash() {
  const node = flash;
  flash = null;
  return node;
}
