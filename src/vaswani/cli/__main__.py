"""`python -m vaswani.cli ...` (what torchrun starts): the `vaswani` command."""

import sys

from vaswani.cli import main

sys.exit(main())
