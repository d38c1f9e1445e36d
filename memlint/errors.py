"""The one exception for "memlint could not do its job" (exit 2): a bad command line or argument,
a missing file, an unusable model or setting. Light on purpose: the CLI imports it at start-up."""


class MemlintError(Exception):
    """memlint could not do its job; the message is one line for the user."""


UsageError = MemlintError   # the CLI's name for it
