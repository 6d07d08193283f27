// A reply read out (the "voice" links of the HTTP API's answer: channels/http/voice.py) as an audio player
// beside its text. The file is behind the token, which an <audio src> cannot send: it is fetched with it
// and played from a blob: URL (the page's Content-Security-Policy allows media from 'self' and blob:).

import { blob } from "./api.js";
import { h } from "./dom.js";

export function voicePlayer(ref) {
  const audio = h("audio", { controls: true, preload: "metadata", "aria-label": "Spoken reply" });
  const note = h("span", { class: "muted" }, ` ${ref.duration_secs.toFixed(1)} s`);
  blob(ref.url)
    .then((data) => { audio.src = URL.createObjectURL(data); })
    .catch((err) => { note.textContent = ` (the spoken reply could not be loaded: ${err.message})`; });
  return h("li", { class: "msg bot voice" }, h("span", { class: "who" }, "Tusk"), audio, note);
}
