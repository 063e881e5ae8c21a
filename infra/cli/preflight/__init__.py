"""`elastic-training preflight STACK`: know before you pay.

checks.py   the checks (read-only AWS calls, local tools), one result each, in order
result.py   a check's result (PASS, WARN, FAIL, SKIP); aws_calls.py an AWS call that cannot end in a traceback
capacity.py, spot.py, spot_role.py, eks_versions.py, local_tools.py   the checks of more than a few lines
report.py   the table, the Markdown summary and the cost lines it prints
command.py  the command line: arguments, exit codes, one-line errors
"""

from infra.cli.preflight.checks import CHECK_IDS, QUOTA_BY_FAMILY, Check, Preflight, default_client
from infra.cli.preflight.command import build_parser, main

__all__ = ["CHECK_IDS", "QUOTA_BY_FAMILY", "Check", "Preflight", "build_parser", "default_client", "main"]
