"""Entry script of the PyInstaller build: what the `gpuscope` command (packaging/bin/gpuscope) runs."""

from gpuscope.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
