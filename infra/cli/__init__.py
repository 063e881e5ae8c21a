"""The `elastic-training` command and its subcommands (main.py dispatches): synth and its mocks, preflight,
cost, up/destroy, local, config-table. Tools only: nothing in infra/ imports this folder."""
