"""The command line's exit statuses, in one place for every subcommand."""

from __future__ import annotations

#: A run (or a diff's check) failed.
EXIT_RUN_FAILED = 1
#: Bad input: a wrong path, an out-of-range value, an unreadable file (one line on stderr).
EXIT_USAGE = 2
#: The run finished, but a file did not land where it was asked to (the session went to
#: a fallback place, named on stderr, or nowhere).
EXIT_NOT_SAVED = 3
#: The reader of the output went away (``specdeck ... | head``): 128 + SIGPIPE, as a
#: shell reports a command ended by a broken pipe.
EXIT_BROKEN_PIPE = 141

# A run ended by a signal (Ctrl+C, SIGTERM, SIGHUP) exits with the shell's status for
# it, 128 + the signal: ``specdeck.hosts.stopping.stopped_status``.
