class ConfigError(ValueError):
    """A bad value in the configuration; the message names it and the valid choices."""
