"""`pulumi up` entry point: validate the stack config, build the stack, export its outputs.

It lives at the project root, and Pulumi.yaml sets no `main`, so the engine's working directory
for the program and for every plugin is the root (pulumi/pulumi pkg/engine/project.go getPwdMain:
a directory `main` becomes every plugin's cwd). The dynamic provider's launcher resolves
`virtualenv: .venv` against that cwd (sdk/python/dist/pulumi-resource-pulumi-python), so it finds
the same `.venv` the language host uses, and `python -m pulumi.dynamic` run from the root imports
`infra` from this checkout. tests/components/test_provider_host.py starts that host as the engine does.
"""

import pulumi

from infra.config import ConfigError, load_settings
from infra.program import build
from infra.config.stack_file import current_config

try:
    settings = load_settings(current_config(), pulumi.get_stack())
except ConfigError as error:
    # RunError: Pulumi prints the one line, without a traceback.
    raise pulumi.RunError(str(error)) from None

for warning in settings.warnings:
    pulumi.log.warn(warning)

for key, value in build(settings).items():
    pulumi.export(key, value)
