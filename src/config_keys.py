"""Where the configs live, reading them, and each key's declared type and range.

`config/default.yaml` declares every key with its default and, in braces at the start of its
comment, its type and range (or choices): KeySpec reads those."""

import math
import operator
import os
import re

import yaml

from utils.errors import ConfigError, first_line
from utils.registry import unknown_name_message
from utils.values import coerce, type_name

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG_DIR = os.path.join(ROOT, "config")


def yaml_error(path, e):
    """One line naming the file, the line and what is wrong."""
    mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
    where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
    what = getattr(e, "problem", None) or first_line(e)
    return f"{path} is not valid YAML{where}: {what}"


def load_yaml(path):
    try:
        with open(path) as f:
            data = yaml.safe_load(f)
    except yaml.YAMLError as e:
        raise ConfigError(yaml_error(os.path.relpath(path, ROOT), e)) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{os.path.relpath(path, ROOT)} must hold a mapping of keys to values")
    return data


def load_defaults():
    """default.yaml: every key with its default."""
    return load_yaml(os.path.join(CONFIG_DIR, "default.yaml"))


def section_keys(sections):
    """The top-level keys of default.yaml under the given `# --- <section> ---` headings."""
    keys, current = [], None
    with open(os.path.join(CONFIG_DIR, "default.yaml")) as f:
        for line in f:
            heading = re.match(r"# --- (.+) ---\s*$", line)
            if heading:
                current = heading.group(1)
            elif current in sections and re.match(r"\w+:", line):
                keys.append(line.split(":", 1)[0])
    return keys


class KeySpec:
    """The type and range (or choices) declared in braces at the start of a key's comment in
    default.yaml: `{int >= 1}`, `{float in (0, 1]}`, `{float > 0 or null}`, `{one of: hard, soft}`."""

    PATTERN = re.compile(
        r"(int|float)(?:\s*(>=|>|<=|<)\s*(\S+)|\s+in\s*([\[(])\s*([^,]+),\s*"
        r"([^\])]+?)\s*([\])]))?"
    )

    def __init__(self, text):
        self.text = text.strip()
        body = self.text
        self.nullable = body.endswith(" or null")
        if self.nullable:
            body = body[: -len(" or null")].strip()
        self.kind, self.choices, self.bounds = None, None, []
        if body.startswith("one of:"):
            self.choices = [yaml.safe_load(c.strip()) for c in body[len("one of:") :].split(",")]
            return
        m = self.PATTERN.fullmatch(body)
        if m is None:
            raise ValueError(f"cannot read the key spec {{{text}}}")
        self.kind = m.group(1)
        if m.group(2):
            self.bounds = [(m.group(2), float(m.group(3)))]
        elif m.group(4):
            self.bounds = [
                (">=" if m.group(4) == "[" else ">", float(m.group(5))),
                ("<=" if m.group(7) == "]" else "<", float(m.group(6))),
            ]

    def check(self, key, value, default):
        """-> the value, converted to the declared type; ConfigError if it is not allowed."""
        if value is None and self.nullable:
            return None
        if self.choices is not None:
            if value not in self.choices:
                raise ConfigError(unknown_name_message(key, value, self.choices))
            return value
        basis = 0 if self.kind == "int" else 0.0
        try:
            value = coerce(key, value, basis)
        except ConfigError:
            raise ConfigError(
                f"{key}={value!r} has the wrong type: expected {self.text} "
                f"(default {default!r}), got {type_name(value)}"
            ) from None
        if math.isnan(value) or not all(COMPARE[op](value, bound) for op, bound in self.bounds):
            raise ConfigError(f"{key}={value!r} is out of range: expected {self.text} (default {default!r})")
        return value


COMPARE = {">=": operator.ge, ">": operator.gt, "<=": operator.le, "<": operator.lt}
SPEC_LINE = re.compile(r"^(\w+):[^#]*#\s*\{([^}]*)\}")


def key_specs(path=None):
    """{key: KeySpec} for every key of default.yaml whose comment declares one."""
    path = path or os.path.join(CONFIG_DIR, "default.yaml")
    specs = {}
    with open(path) as f:
        for line in f:
            m = SPEC_LINE.match(line)
            if m:
                specs[m.group(1)] = KeySpec(m.group(2))
    return specs
