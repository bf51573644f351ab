"""`python -m vaswani ...`: the same as the `vaswani` command."""

from vaswani.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
