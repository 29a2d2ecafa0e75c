class ConfigError(ValueError):
    """A bad value in the configuration; the message names it and the valid choices."""


def first_line(error):
    """An exception's first line: third-party messages can run to pages."""
    return (str(error).strip().splitlines() or [""])[0]
