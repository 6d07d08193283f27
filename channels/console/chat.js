// The chat page: the local chats (the `http` channel's), one conversation, and a box to talk in.
// Messages go through POST /v1/chats/{chat}/messages like any HTTP client's, so slash commands
// (/memory, /forget, /help ...) work exactly as in any other chat. A file (the Attach button, or
// dropped on the conversation) goes with the message as multipart/form-data; the text is its caption;
// an audio file goes as a voice note. A reply read out (/voice) shows as an audio player (voice.js).
// The model's replies are rendered from Markdown (markdown.js); Tusk's own words (a command's answer:
// the reply's format is "plain") are shown as written, so fact 5 stays 5 and `<persona>` stays there.

import { api, chatPath, stream } from "./api.js";
import { bytes, h } from "./dom.js";
import { markdown } from "./markdown.js";
import { voicePlayer } from "./voice.js";

const CHAT_NAME = "[A-Za-z0-9_\\-][A-Za-z0-9_.\\-]{0,99}";
const DEFAULT_CHAT = "console";

// kind: "user", "bot" (the model's Markdown), "own" (Tusk's own words, as written) or "error"
function bubble(kind, text) {
  const body = kind === "bot" ? markdown(text) : h("div", { class: "plain" }, text);
  const who = { user: "You", bot: "Tusk", own: "Tusk", error: "Problem" }[kind];
  return h("li", { class: `msg ${kind === "own" ? "bot own" : kind}` }, h("span", { class: "who" }, who), body);
}

async function loadChats(list, current) {
  const { chats } = await api("/api/chats?channel=http");
  const names = chats.map((c) => c.chat_id);
  if (current && !names.includes(current)) names.push(current);
  list.replaceChildren(...names.map((name) => {
    const info = chats.find((c) => c.chat_id === name);
    return h("li", {},
      h("a", { href: `#/chat/${encodeURIComponent(name)}`, class: name === current ? "current" : null }, name),
      h("span", { class: "muted" }, info ? ` ${info.messages} msgs` : " new"));
  }));
  return chats;
}

function conversation(chatId, exists, onTurn) {
  const messages = h("ol", { class: "messages", "aria-live": "polite" });
  const typing = h("p", { class: "typing", hidden: true }, "Tusk is typing", h("span", { class: "dots" }, "…"));
  const text = h("textarea", { name: "text", rows: 3, required: true, "aria-label": "Message",
    placeholder: "Write a message, or a command: /help, /memory, /status, /forget" });
  const send = h("button", { type: "submit" }, "Send");
  let pending = null;  // the file to send with the next message
  const chosen = h("span", { class: "attached muted", "aria-live": "polite" });
  const picker = h("input", { type: "file", name: "file", hidden: true, "aria-label": "File to send",
    onchange: () => choose(picker.files[0] || null) });
  const attach = h("button", { type: "button", class: "attach", title: "Send a photo, voice note or document",
    onclick: () => picker.click() }, "Attach");
  const choose = (file) => {
    pending = file;
    chosen.textContent = file ? `📎 ${file.name} (${bytes(file.size)})` : "";
    text.required = !file;  // a file may go without a caption
  };
  const add = (kind, value) => {
    messages.append(bubble(kind, value));
    messages.lastChild.scrollIntoView({ block: "end" });
  };
  const form = h("form", {
    class: "composer",
    onsubmit: async (event) => {
      event.preventDefault();
      const value = text.value;
      const file = pending;
      if ((!value.trim() && !file) || send.disabled) return;
      add("user", file ? `📎 ${file.name}${value.trim() ? `\n${value}` : ""}` : value);
      text.value = "";
      picker.value = "";
      choose(null);
      typing.hidden = false;
      send.disabled = true;
      try {
        let replies, formats, voice;
        if (file) {  // a message with a file is sent as a form and answered whole
          const body = new FormData();
          body.append("text", value);
          body.append("user", "console");
          body.append(file.type.startsWith("audio/") ? "voice" : "file", file, file.name);
          ({ replies, formats, voice } = await api(`/v1/chats/${encodeURIComponent(chatId)}/messages`,
            { method: "POST", body }));
        } else {
          let live = null, sofar = "";  // the reply as it is written, replaced by the final one
          const show = (node) => {
            if (!live) {
              live = h("li", { class: "msg bot live" }, h("span", { class: "who" }, "Tusk"), node);
              messages.append(live);
            } else live.replaceChildren(live.firstChild, node);
            live.scrollIntoView({ block: "end" });
          };
          ({ replies, formats, voice } = await stream(`/v1/chats/${encodeURIComponent(chatId)}/messages`,
            { text: value, user: "console" }, (name, data) => {
              if (name === "delta") {
                sofar = data.replace ? data.text : sofar + data.text;
                show(markdown(sofar));
              } else if (name === "tool") {
                sofar = "";
                show(h("p", { class: "status" }, data.status));
              }
            }));
          if (live) live.remove();
        }
        for (const ref of voice || []) messages.append(voicePlayer(ref));  // the voice first, as on the platforms
        replies.forEach((reply, i) => add(formats?.[i] === "plain" ? "own" : "bot", reply));
      } catch (err) {
        add("error", err.message);
      } finally {
        typing.hidden = true;
        send.disabled = false;
        text.focus();
        onTurn();
      }
    },
  }, h("div", { class: "compose-box" }, text, chosen), attach, picker, send);
  text.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      form.requestSubmit();
    }
  });
  const head = h("div", { class: "chat-head" }, h("h2", {}, chatId),
    h("a", { href: `#/memory/http/${encodeURIComponent(chatId)}` }, "Memory of this chat →"));
  const earlier = exists ? api(`${chatPath("http", chatId)}/session?limit=100`) : Promise.resolve({ messages: [] });
  earlier.then((data) => {
    for (const m of data.messages) {
      if ((m.role === "user" || m.role === "assistant") && m.content) add(m.role === "user" ? "user" : "bot", m.content);
    }
  }).catch((err) => add("error", err.message)).finally(() => text.focus());
  const box = h("div", { class: "conversation" }, head, messages, typing, form);
  box.addEventListener("dragover", (event) => {
    event.preventDefault();  // allow a drop
    box.classList.add("dropping");
  });
  box.addEventListener("dragleave", () => box.classList.remove("dropping"));
  box.addEventListener("drop", (event) => {
    event.preventDefault();
    box.classList.remove("dropping");
    const file = event.dataTransfer?.files?.[0];
    if (file) choose(file);
    text.focus();
  });
  return box;
}

export async function renderChat(view, chatId) {
  const list = h("ul", { class: "chat-links" });
  const input = h("input", { name: "name", required: true, pattern: CHAT_NAME, placeholder: "new chat name",
    title: "letters, digits, _ . - (up to 100)", "aria-label": "New chat name" });
  const create = h("form", {
    class: "new-chat",
    onsubmit: (event) => {
      event.preventDefault();
      window.location.hash = `#/chat/${encodeURIComponent(input.value.trim())}`;
    },
  }, input, h("button", { type: "submit" }, "Open"));
  const aside = h("aside", { class: "chat-list" }, h("h2", {}, "Local chats"),
    h("p", { class: "muted" }, "Each chat keeps its own memory."), create, list);
  const chats = await loadChats(list, chatId);
  if (!chatId) {
    // Only while this page is still the one shown: a user (or a link) may have opened a chat meanwhile.
    if (view.isConnected) window.location.replace(`#/chat/${encodeURIComponent(chats[0]?.chat_id ?? DEFAULT_CHAT)}`);
    return;
  }
  const exists = chats.some((c) => c.chat_id === chatId);
  view.replaceChildren(h("section", { class: "chat-page" }, aside,
    conversation(chatId, exists, () => loadChats(list, chatId))));
}
