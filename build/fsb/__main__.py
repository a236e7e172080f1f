"""`python -m fsb` is the `fsb` command."""

import sys

from fsb.cli.app import main

sys.exit(main())
