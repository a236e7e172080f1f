"""`python -m fsb` is the `fsb` command."""

import sys

from .cli import main

sys.exit(main())
