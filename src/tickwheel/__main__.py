"""``python -m tickwheel``: the same as the ``tickwheel`` command."""

from tickwheel.cli import main

if __name__ == "__main__":
    main()
