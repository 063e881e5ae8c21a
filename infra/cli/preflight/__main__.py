import sys

from infra.cli.preflight.command import main

sys.exit(main())
