"""``python -m attnlab``: the ``attnlab`` command line, for environments whose scripts folder is not on PATH."""

from attnlab.cli import main

if __name__ == "__main__":
    main(prog_name="attnlab")
