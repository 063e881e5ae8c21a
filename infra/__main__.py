"""`pulumi up` entry point: validate the stack config, build the stack, export its outputs."""

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
