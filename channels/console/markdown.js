// A small Markdown renderer that builds DOM nodes: every piece of the source ends up in a text
// node (never parsed as HTML), so `<script>` in a message or in MEMORY.md shows as those characters.
// Blocks: headings, paragraphs (single newlines kept), fenced code, block quotes, bullet and numbered
// lists (nested by indentation), rules. Inline: `code`, **bold**, *italic*, ~~strike~~, links
// (http, https and mailto only) and bare URLs.

import { h } from "./dom.js";

const FENCE = /^\s{0,3}(```|~~~)/;
const HEADING = /^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const RULE = /^\s{0,3}([-*_])(\s*\1){2,}\s*$/;
const QUOTE = /^\s{0,3}>\s?/;
const ITEM = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/;
const INLINE = new RegExp([
  /(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)/.source,                 // 1, 2: code
  /\*\*(?=\S)([\s\S]*?\S)\*\*/.source,                          // 3: bold
  /__(?=\S)([\s\S]*?\S)__(?!\w)/.source,                        // 4: bold
  /\*(?=[^\s*])([\s\S]*?[^\s*])\*/.source,                      // 5: italic
  /(?<![\w])_(?=[^\s_])([\s\S]*?[^\s_])_(?!\w)/.source,         // 6: italic
  /~~(?=\S)([\s\S]*?\S)~~/.source,                              // 7: strike
  /\[([^\][]+)\]\(\s*<?([^()\s<>]+)>?\s*\)/.source,             // 8, 9: link
  /(https?:\/\/[^\s<>"'()]*[^\s<>"'().,;:!?])/.source,          // 10: bare URL
].join("|"));

function safeHref(href) {
  try {
    const url = new URL(href, window.location.href);
    return ["http:", "https:", "mailto:"].includes(url.protocol) ? url.href : null;
  } catch {
    return null;
  }
}

function link(href, children) {
  const safe = safeHref(href);
  if (!safe) return null;
  return h("a", { href: safe, target: "_blank", rel: "noopener noreferrer nofollow" }, children);
}

export function inline(text) {
  const out = [];
  let rest = text;
  while (rest) {
    const m = INLINE.exec(rest);
    if (!m) {
      out.push(rest);
      break;
    }
    if (m.index > 0) out.push(rest.slice(0, m.index));
    let node = null;
    if (m[2] !== undefined) node = h("code", {}, m[2]);
    else if (m[3] !== undefined || m[4] !== undefined) node = h("strong", {}, inline(m[3] ?? m[4]));
    else if (m[5] !== undefined || m[6] !== undefined) node = h("em", {}, inline(m[5] ?? m[6]));
    else if (m[7] !== undefined) node = h("del", {}, inline(m[7]));
    else if (m[8] !== undefined) node = link(m[9], inline(m[8]));
    else if (m[10] !== undefined) node = link(m[10], m[10]);
    out.push(node ?? m[0]);  // a link we won't make stays as its text
    rest = rest.slice(m.index + m[0].length);
  }
  return out;
}

function withBreaks(text) {
  const out = [];
  text.split("\n").forEach((line, i) => {
    if (i) out.push(h("br"));
    out.push(...inline(line));
  });
  return out;
}

function listBlock(lines, i) {
  const first = ITEM.exec(lines[i]);
  const indent = first[1].length;
  const ordered = /\d/.test(first[2]);
  const list = ordered ? h("ol", { start: parseInt(first[2], 10) === 1 ? null : String(parseInt(first[2], 10)) }) : h("ul");
  while (i < lines.length) {
    const m = ITEM.exec(lines[i]);
    if (!m || m[1].length !== indent || /\d/.test(m[2]) !== ordered) break;
    const body = [m[3]];
    i += 1;
    while (i < lines.length && lines[i].trim() && !(ITEM.exec(lines[i]) && ITEM.exec(lines[i])[1].length <= indent)) {
      body.push(lines[i].replace(new RegExp(`^\\s{0,${indent + 4}}`), ""));
      i += 1;
    }
    const nested = body.length > 1 && body.slice(1).some((l) => ITEM.test(l) || FENCE.test(l));
    list.append(h("li", {}, nested ? blocks(body) : withBreaks(body.join("\n"))));
    if (i < lines.length && !lines[i].trim() && ITEM.exec(lines[i + 1] || "")?.[1].length === indent) i += 1;
  }
  return [list, i];
}

function blocks(lines) {
  const out = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    let m;
    if (!line.trim()) {
      i += 1;
    } else if ((m = FENCE.exec(line))) {
      const code = [];
      for (i += 1; i < lines.length && !lines[i].trim().startsWith(m[1]); i += 1) code.push(lines[i]);
      i += 1;
      out.push(h("pre", {}, h("code", {}, code.join("\n"))));
    } else if ((m = HEADING.exec(line))) {
      out.push(h(`h${m[1].length}`, {}, inline(m[2])));
      i += 1;
    } else if (RULE.test(line)) {
      out.push(h("hr"));
      i += 1;
    } else if (QUOTE.test(line)) {
      const quoted = [];
      for (; i < lines.length && QUOTE.test(lines[i]); i += 1) quoted.push(lines[i].replace(QUOTE, ""));
      out.push(h("blockquote", {}, blocks(quoted)));
    } else if (ITEM.test(line)) {
      const [list, next] = listBlock(lines, i);
      out.push(list);
      i = next;
    } else {
      const para = [];
      for (; i < lines.length && lines[i].trim() && !FENCE.test(lines[i]) && !HEADING.test(lines[i])
        && !QUOTE.test(lines[i]) && !(para.length && ITEM.test(lines[i])); i += 1) para.push(lines[i]);
      out.push(h("p", {}, withBreaks(para.join("\n"))));
    }
  }
  return out;
}

export function markdown(text) {
  return h("div", { class: "md" }, blocks(String(text ?? "").replace(/\r\n?/g, "\n").split("\n")));
}
