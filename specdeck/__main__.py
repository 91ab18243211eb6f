"""``python -m specdeck``: the same as the ``specdeck`` command."""

from specdeck.cli import entry

if __name__ == "__main__":  # the engine process (spawned) imports this module too
    entry()
