"""Kept for callers that still run the folder (`runpy.run_path("infra")`): the program's entry point
is the project root's __main__.py (see there why it moved)."""

import runpy
from pathlib import Path

runpy.run_path(str(Path(__file__).resolve().parent.parent / "__main__.py"), run_name="__main__")
