"""The one error a bad config value raises: its text is the one line a user sees."""

from __future__ import annotations

import json
from typing import Any

# The most characters of a value the line shows: a list of 50,000 CIDR blocks (or any pasted blob)
# would otherwise make the "one line" megabytes long. Long enough for every value a key takes when
# it is right (an image reference by digest is about 130 characters).
SHOWN_CHARACTERS = 200


class Written(str):
    """A number as the user wrote it ("70", ".5"), shown without quotes: a decimal key's parsed float would
    show 70 as 70.0, which the user never wrote."""


class ConfigError(ValueError):
    """A stack config value that breaks its rule. `str()` is the one line a user sees."""

    def __init__(self, key: str, value: Any, rule: str):
        self.key, self.value, self.rule = key, value, rule
        super().__init__(f"config {key}={show_value(value)} is invalid: {rule}")


def show_value(value: Any) -> str:
    """The value as the line shows it: strings quoted, numbers and lists as JSON; one too long to read
    is cut, saying how long it was (the first items of a list, the start of a string)."""
    if isinstance(value, Written):
        return str(value)
    shown = json.dumps(value) if not isinstance(value, str) else repr(value)
    if len(shown) <= SHOWN_CHARACTERS:
        return shown
    if isinstance(value, (list, tuple)):
        first: list[Any] = []
        for item in value:
            if len(json.dumps([*first, item])) > SHOWN_CHARACTERS // 2:
                break
            first.append(item)
        items = f"{len(value)} item{'s' if len(value) != 1 else ''}"
        return f"{json.dumps(first)[:-1]}{', ' if first else ''}... ({items})]"
    if isinstance(value, str):
        return f"{repr(value[: SHOWN_CHARACTERS // 2])[:-1]}...' ({len(value)} characters)"
    return shown[:SHOWN_CHARACTERS] + "..."
