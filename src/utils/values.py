"""Typed values from the command line and YAML files."""

from utils.errors import ConfigError


def type_name(v):
    return {bool: "bool", int: "int", float: "float", str: "str", list: "list", dict: "mapping"}.get(
        type(v), type(v).__name__
    )


def coerce(key, value, basis):
    """`value` converted to the type of `basis` (the default), or ConfigError."""
    if basis is None:
        return value
    if isinstance(basis, bool):
        if isinstance(value, bool):
            return value
    elif isinstance(basis, int):
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        number = _as_number(value)
        if number is not None and float(number).is_integer():
            return int(number)
    elif isinstance(basis, float):
        number = _as_number(value)
        if number is not None:
            return float(number)
    elif isinstance(basis, str):
        if isinstance(value, str):
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
    elif isinstance(basis, list | dict) and isinstance(value, type(basis)):
        return value
    raise ConfigError(
        f"{key}={value!r} has the wrong type: expected {type_name(basis)} "
        f"(default {basis!r}), got {type_name(value)}"
    )


def _as_number(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def plain_config(args):
    """A run's settings (a namespace) as JSON-ready values: what checkpoints and W&B keep."""
    import json

    return json.loads(json.dumps(vars(args), default=str))
