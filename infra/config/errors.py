"""The one error a bad config value raises: its text is the one line a user sees."""

from __future__ import annotations

import json
from typing import Any


class ConfigError(ValueError):
    """A stack config value that breaks its rule. `str()` is the one line a user sees."""

    def __init__(self, key: str, value: Any, rule: str):
        self.key, self.value, self.rule = key, value, rule
        super().__init__(f"config {key}={show_value(value)} is invalid: {rule}")


def show_value(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, str) else repr(value)
