"""`python -m helmop.cli`: the same as the `helmop` command."""

import sys

from .main import main

sys.exit(main())
