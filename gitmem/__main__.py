"""``python -m gitmem``: the same as the ``gitmem`` command."""

from gitmem.cli import main

if __name__ == "__main__":
    main()
