"""`python -m infra.cli`: the same as the `elastic-training` command."""

from infra.cli.main import run

run()
