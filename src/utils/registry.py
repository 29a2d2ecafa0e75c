import difflib

from utils.errors import ConfigError


def closest(name, choices):
    """The closest of `choices` to `name`, or None."""
    match = difflib.get_close_matches(str(name), [str(c) for c in choices], n=1, cutoff=0.5)
    return match[0] if match else None


def unknown_name_message(kind, name, choices):
    choices = sorted(str(c) for c in choices)
    msg = f"unknown {kind} '{name}'; valid choices: {', '.join(choices)}"
    guess = closest(name, choices)
    if guess is not None:
        msg += f" (did you mean '{guess}'?)"
    return msg


class Registry(dict):
    """A name -> constructor table whose failed look-ups list the registered names."""

    def __init__(self, kind, entries=None):
        super().__init__(entries or {})
        self.kind = kind

    def __getitem__(self, name):
        if name not in self:
            raise ConfigError(unknown_name_message(self.kind, name, self.keys()))
        return super().__getitem__(name)

    def register(self, name):
        def deco(obj):
            self[name] = obj
            return obj
        return deco
