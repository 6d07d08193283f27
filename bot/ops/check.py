"""One check's outcome, as `tusk doctor` and `tusk init` print it: a name, a verdict, what was found, the fix.

The checks themselves live where they look: bot/ops/doctor.py (the order, data dir, HTTP access,
platform tokens), bot/ops/doctor_env.py (settings file, unknown variables, HTTP port), bot/ops/probe.py
(the model), bot/ops/init_checks.py (`tusk init`'s answers, through the same probes).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    verdict: str  # "ok", "warn", "fail", or "skip" (not checked, on request)
    detail: str
    fix: str = ""
    setting: str = ""  # the setting a failure blames, where one is clear (`tusk init` asks only that one again)

    def line(self) -> str:
        text = f"{self.verdict.upper():<5} {self.name}: {self.detail}"
        return text + (f"\n      fix: {self.fix}" if self.fix else "")
