// The console's entry point: a hash router between the chat page and the memory browser.
//   #/chat/{chat}                  talk in a local chat
//   #/memory                       every chat across channels
//   #/memory/{channel}/{chat}      one chat's memory
//   #/tools                        the MCP servers and their tools, the skills
//   #/usage                        what the model calls cost, against the spend limits
//   #/reminders                    every chat's reminders and schedules: pause, resume, cancel

import { signOut, takeTokenFromLink } from "./api.js";
import { renderChat } from "./chat.js";
import { h } from "./dom.js";
import { renderChatDetail, renderMemoryList } from "./memory.js";
import { renderReminders } from "./reminders.js";
import { renderTools } from "./tools.js";
import { renderUsage } from "./usage.js";

let view = document.getElementById("view");
let generation = 0;

async function route() {
  const mine = ++generation;
  // Each page renders into a view of its own: a page still loading when the user moves on (its
  // fetches answer late) writes into its old, detached view and can no longer cover the new page.
  const fresh = view.cloneNode(false);
  fresh.append(h("p", { class: "muted" }, "Loading…"));
  view.replaceWith(fresh);
  view = fresh;
  const parts = window.location.hash.replace(/^#\/?/, "").split("/");
  const page = ["memory", "tools", "usage", "reminders"].includes(parts[0]) ? parts[0] : "chat";
  for (const link of document.querySelectorAll("header nav a")) {
    link.setAttribute("aria-current", String(link.dataset.page === page));
  }
  try {
    const [first, ...rest] = parts.slice(1).map(decodeURIComponent);
    if (page === "tools") await renderTools(view);
    else if (page === "usage") await renderUsage(view);
    else if (page === "reminders") await renderReminders(view);
    else if (page === "memory" && first && rest.length) await renderChatDetail(view, first, rest.join("/"));
    else if (page === "memory") await renderMemoryList(view);
    else await renderChat(view, first || null);
  } catch (err) {
    if (mine === generation) view.replaceChildren(h("p", { class: "error" }, err.message));
  }
}

takeTokenFromLink();
document.getElementById("sign-out").addEventListener("click", signOut);
window.addEventListener("hashchange", route);
route();
