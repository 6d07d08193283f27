"""Operator commands: the `tusk` CLI, doctor, the admin commands and the web console's backend."""
