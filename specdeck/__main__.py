from specdeck.cli import entry

entry()
