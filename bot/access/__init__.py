"""The access gate: who may start a turn, and how often, before a message reaches the bus.

Every platform message passes it once (channels/base.py applies it; bot/app.py wires it):

    allow.py     the `*_ALLOW_FROM` allow-lists' form: ids only, checked when the settings are read
    pairing.py   how a stranger becomes someone Tusk answers, with the owner's approval (pairing.json)
    flood.py     turns per minute per sender and per chat, new chats per hour, in front of the bus

Nothing here knows the agent: a refused message is never journaled, saved or sent to the model.
"""
