"""Entry script of the PyInstaller build: the same as the `gpuscope` console script."""

from gpuscope.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
