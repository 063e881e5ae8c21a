"""One preflight check's result: its id, PASS, WARN, FAIL or SKIP, a short message and, for a failure,
the fix. checks.py and the check modules beside it (capacity.py, spot.py, spot_role.py, local_tools.py,
eks_versions.py) return these; report.py prints them."""

from __future__ import annotations

from dataclasses import dataclass

from infra.cli.preflight.aws_calls import CouldNotCheck

PASS, WARN, FAIL, SKIP = "pass", "warn", "fail", "skip"


@dataclass
class Check:
    id: str
    status: str
    message: str
    fix: str = ""

    @property
    def checked(self) -> bool:
        """False when the check, or a part of it, could not run (AWS unreachable, denied, throttled): every
        such message says "could not check" (could_not_check, capacity.py). Not a pass, whatever the status."""
        return "could not check" not in self.message

    def as_json(self) -> dict[str, str]:
        return {
            "id": self.id,
            "status": self.status,
            "message": self.message + (f"; fix: {self.fix}" if self.fix else ""),
        }


def could_not_check(check_id: str, error: CouldNotCheck, extra: str = "") -> Check:
    return Check(check_id, WARN, f"could not check: {error}" + (f"; {extra}" if extra else ""))
