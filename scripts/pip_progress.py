"""pip's output, read from stdin, as a few progress lines for a log (scripts/setup.sh, when its output is not a
terminal): pip shows its own progress bar only on a terminal, and with --quiet nothing at all, so a first
setup sat silent for minutes while about 3 GB of wheels came down.

    python -m pip install --progress-bar raw ... | python scripts/pip_progress.py [--quiet]

pip at its default verbosity logs "Downloading NAME (SIZE)" before each download and, with `--progress-bar
raw`, "Progress CURRENT of TOTAL" (bytes) at most every 0.25 s while it runs (pip/_internal/network/
download.py `_prepare_download`, pip/_internal/cli/progress_bars.py `_raw_progress_bar`, pip 26.3). This
prints:

- `setup:   downloading NAME (SIZE)` for each download of at least BIG_MB (not with --quiet);
- `setup:   still downloading: N MB so far (M s)` at most every SETUP_PROGRESS_EVERY_S seconds (default 30)
  while bytes arrive;
- any line of scripts/install-torch.sh (`install-torch: ...`) as it is.

Everything else pip writes to stdout (Collecting..., Requirement already satisfied...) is dropped; its
warnings and errors go to stderr, which does not pass through here.
"""

from __future__ import annotations

import os
import re
import sys
import time
from typing import Callable, Iterable, TextIO

BIG_MB = 10
# "Downloading NAME (SIZE)", or "Resuming download NAME (DONE/SIZE)" after a cut (pip's format_size: bytes,
# kB or MB, decimal).
DOWNLOADING = re.compile(
    r"^\s*(?:Downloading|Resuming download) (?P<name>\S+) \((?:[^/)]+/)?(?P<size>[0-9.]+) (?P<unit>bytes|kB|MB)\)"
)
PROGRESS = re.compile(r"^Progress (?P<current>[0-9]+) of (?P<total>[0-9]+)$")
UNIT_MB = {"bytes": 1e-6, "kB": 1e-3, "MB": 1.0}


def report(
    lines: Iterable[str],
    out: TextIO,
    quiet: bool = False,
    every_s: float = 30.0,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    started = last = clock()
    finished_bytes = 0  # fetched by downloads already done
    current = 0  # fetched by the download under way
    resumed_from: int | None = 0  # bytes a resumed download had before (None: its first Progress says)
    for raw in lines:
        line = raw.rstrip("\n")
        progress = PROGRESS.match(line)
        if progress:
            if resumed_from is None:
                resumed_from = int(progress["current"])
            now_at = int(progress["current"]) - resumed_from
            if now_at < current:  # a new download without its line: pip starts each at 0
                finished_bytes += current
            current = now_at
            now = clock()
            if now - last >= every_s:
                last = now
                print(
                    f"setup:   still downloading: {(finished_bytes + current) / 1e6:.0f} MB so far "
                    f"({now - started:.0f} s)",
                    file=out,
                    flush=True,
                )
            continue
        downloading = DOWNLOADING.match(line)
        if downloading:
            finished_bytes += current
            current = 0
            resumed_from = None if line.lstrip().startswith("Resuming") else 0
            if not quiet and float(downloading["size"]) * UNIT_MB[downloading["unit"]] >= BIG_MB:
                print(
                    f"setup:   downloading {downloading['name']} ({downloading['size']} {downloading['unit']})",
                    file=out,
                    flush=True,
                )
            continue
        if line.startswith("install-torch:"):
            print(line, file=out, flush=True)


def main(argv: list[str]) -> int:
    quiet = argv == ["--quiet"]
    if argv and not quiet:
        print(f"pip_progress: unknown arguments {' '.join(argv)}; the only option is --quiet", file=sys.stderr)
        return 2
    report(sys.stdin, sys.stdout, quiet=quiet, every_s=float(os.environ.get("SETUP_PROGRESS_EVERY_S", "30")))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
