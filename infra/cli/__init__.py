"""The `elastic-training` command and its subcommands (main.py dispatches): synth and its mocks, preflight,
cost, up/destroy, local, config-table; limits.py checks that a stack's `up` fits deploy.yml's job. Tools only: nothing in infra/ imports this folder."""
