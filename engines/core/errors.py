"""Errors a user can cause and fix; front ends print their message as one line."""


class UserError(Exception):
    """Something the user can fix; printed as one line."""


class SettingsError(ValueError):
    """A setting is out of range; the message names it and the allowed range."""


class ModelError(Exception):
    """A model cannot be used; the message says why and what to do."""


class GroupError(ModelError):
    """A group of processes sharing a target cannot start or go on; the message says
    which rank and why (``engines.distributed``). Rank 0 alone prints it."""


class AppCrashed(Exception):
    """The app ended on an unhandled exception: Textual has printed it, and the command
    exits non-zero (Textual's own ``run`` returns as if all went well)."""
