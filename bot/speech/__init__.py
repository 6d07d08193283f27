"""Voice replies (issue 45): a reply read out and sent as the platform's voice message, its text beside it.

    replies.py   VoiceReplies: which turns are answered with voice (/voice, TUSK_VOICE_REPLIES), and the
                 reply spoken within TUSK_TTS_TIMEOUT and sent, else the text alone, once
    spoken.py    what is read out: Markdown stripped; code, tables, long links named; cut at a sentence end
    language.py  the reply's language (py3langid): the engine's `{lang}` and the words for code, tables, links
    engines.py   the providers: litellm's speech API (OpenAI, any /v1/audio/speech server) or a local command
    encode.py    the engine's audio -> OGG/Opus mono 48 kHz (PyAV), its duration and waveform
    cost.py      each synthesis through the spend limits and into the usage ledger (purpose `speech`)
    config.py    the settings (TUSK_TTS_*, TUSK_VOICE_*) and the engine they name
    command.py   /voice on | off | auto | reset

Channels send the voice their platform's way (channels/<platform>/voice.py): Telegram's sendVoice,
Discord's voice message, a Slack audio upload, the HTTP API's link to the file (the console plays it).
PyAV, numpy and py3langid are the `voice` extra: `pip install '.[voice]'`.
"""
