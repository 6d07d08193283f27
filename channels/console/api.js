// Every call to Tusk's API: JSON in and out, the token sent with each, errors thrown with the
// server's message. The token comes from the link `tusk run` / `tusk console-url` prints
// (`#token=...`, a fragment the browser never sends to a server), else it is asked once; either
// way it is removed from the address bar at once and kept in this browser's localStorage, so the
// owner opens the link once, not in every tab or after every restart (a self-hosted console is
// usually the owner's own browser); "Sign out" removes it, as the token dialog says.

const TOKEN_KEY = "tusk-token";
let asking = null;  // one token prompt at a time, however many calls were refused

function showSignOut() {
  const button = document.getElementById("sign-out");
  if (button) button.hidden = !localStorage.getItem(TOKEN_KEY);
}

export function takeTokenFromLink() {
  const match = window.location.hash.match(/^#token=([^&]+)$/);
  if (match) {
    localStorage.setItem(TOKEN_KEY, decodeURIComponent(match[1]));
    history.replaceState(null, "", window.location.pathname + window.location.search);
  }
  showSignOut();
}

// Forget the token in this browser; the next call asks for it again.
export function signOut() {
  localStorage.removeItem(TOKEN_KEY);
  showSignOut();
  window.location.reload();
}

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export const chatPath = (channel, chatId) =>
  `/api/chats/${encodeURIComponent(channel)}/${encodeURIComponent(chatId)}`;

function askToken(problem) {
  if (asking) return asking;
  const dialog = document.getElementById("token-dialog");
  const form = dialog.querySelector("form");
  const input = form.querySelector("input");
  dialog.querySelector(".problem").textContent = problem;
  input.value = "";
  dialog.oncancel = (event) => event.preventDefault();  // Escape would leave every call waiting
  asking = new Promise((resolve) => {
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      localStorage.setItem(TOKEN_KEY, input.value.trim());
      showSignOut();
      dialog.close();
      asking = null;
      resolve();
    }, { once: true });
  });
  dialog.showModal();
  return asking;
}

export async function api(path, { method = "GET", body } = {}) {
  for (;;) {
    const token = localStorage.getItem(TOKEN_KEY);
    const headers = { Accept: "application/json" };
    if (token) headers.Authorization = `Bearer ${token}`;
    const form = body instanceof FormData;  // a message with a file: the browser sets the multipart type
    if (method !== "GET" && !form) headers["Content-Type"] = "application/json";  // else writes are JSON only
    const payload = body === undefined || form ? body : JSON.stringify(body);
    const resp = await fetch(path, { method, headers, body: payload });
    if (resp.status === 401) {
      localStorage.removeItem(TOKEN_KEY);
      await askToken(token ? "That token was refused: try again." : "");
      continue;
    }
    const data = await resp.json().catch(() => ({ error: `${resp.status} ${resp.statusText}` }));
    if (!resp.ok) throw new ApiError(resp.status, data.error || `${resp.status} ${resp.statusText}`);
    return data;
  }
}

// A streamed turn (POST with "stream": true): `onEvent(name, data)` for each Server-Sent Event
// (delta, tool, done, error) as it arrives; resolves with the `done` event's data.
export async function stream(path, body, onEvent) {
  for (;;) {
    const token = localStorage.getItem(TOKEN_KEY);
    const headers = { Accept: "text/event-stream", "Content-Type": "application/json" };
    if (token) headers.Authorization = `Bearer ${token}`;
    const resp = await fetch(path, { method: "POST", headers, body: JSON.stringify({ ...body, stream: true }) });
    if (resp.status === 401) {
      localStorage.removeItem(TOKEN_KEY);
      await askToken(token ? "That token was refused: try again." : "");
      continue;
    }
    if (!resp.ok) {
      const data = await resp.json().catch(() => ({ error: `${resp.status} ${resp.statusText}` }));
      throw new ApiError(resp.status, data.error || `${resp.status} ${resp.statusText}`);
    }
    const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "", result = null;
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const name = (block.match(/^event: (.*)$/m) || [])[1];
        const data = JSON.parse((block.match(/^data: (.*)$/m) || [])[1] || "null");
        if (name === "error") throw new ApiError(503, data.error);
        if (name === "done") result = data;
        onEvent(name, data);
      }
    }
    if (!result) throw new ApiError(502, "the reply stream ended early");
    return result;
  }
}

// A file behind the token (a spoken reply's audio): fetched with it, as a Blob for an object URL, since an
// <audio src> could not send the token.
export async function blob(path) {
  const token = localStorage.getItem(TOKEN_KEY);
  const resp = await fetch(path, { headers: token ? { Authorization: `Bearer ${token}` } : {} });
  if (!resp.ok) throw new ApiError(resp.status, `${resp.status} ${resp.statusText}`);
  return resp.blob();
}
