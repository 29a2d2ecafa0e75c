import difflib

from utils.errors import ConfigError


def closest(name, choices):
    """The closest of `choices` to `name`, or None."""
    match = difflib.get_close_matches(str(name), [str(c) for c in choices], n=1, cutoff=0.5)
    return match[0] if match else None


def closest_few(name, choices, n=3):
    """Up to `n` of `choices` closest to `name`, best first."""
    return difflib.get_close_matches(str(name), [str(c) for c in choices], n=n, cutoff=0.5)


# Longer lists of choices are not printed whole: the message offers the closest few instead.
MAX_LISTED = 12


def unknown_name_message(kind, name, choices, where=None):
    choices = sorted(str(c) for c in choices)
    if len(choices) <= MAX_LISTED:
        msg = f"unknown {kind} '{name}'; valid choices: {', '.join(choices)}"
        guess = closest(name, choices)
        return msg + (f" (did you mean '{guess}'?)" if guess is not None else "")
    guesses = closest_few(name, choices)
    msg = f"unknown {kind} '{name}'; " + (f"did you mean {', '.join(guesses)}? " if guesses else "")
    return (
        msg
        + f"({len(choices)} valid choices"
        + (f", listed in {where})" if where else f": {', '.join(choices[:3])}, ...)")
    )


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


def registrar(table):
    """-> a decorator factory: @it("name") adds the decorated function to `table` under that name
    (the rule tables of learners/selection.py and learners/sharing.py)."""

    def under(name):
        def register(fn):
            table[name] = fn
            return fn

        return register

    return under
