"""Where the configs live, reading them, and each key's declared type and range.

`config/default.yaml` declares the run-wide keys with their defaults and, in braces at the start of
each comment, the type and range (or choices); learners, controllers, agents and the like declare
their own keys beside their code (utils/keys.py). KeySpec reads the type and range of both."""

import copy
import importlib
import math
import operator
import os
import re

import yaml

from utils.errors import ConfigError, first_line
from utils.keys import DECLARED, Key
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


# the packages whose modules declare keys: importing each imports every registered component
COMPONENT_PACKAGES = (
    "components.action_selectors",
    "modules.agents",
    "modules.mixers",
    "modules.critics",
    "controllers",
    "learners",
    "runners",
)


def declared_keys():
    """{name: Key} of the keys components declare beside their code (utils/keys.py)."""
    for package in COMPONENT_PACKAGES:
        importlib.import_module(package)
    return dict(DECLARED)


def default_file_keys(path=None):
    """[Key] of config/default.yaml's run-wide keys: default, the braces' spec, the comment's help
    and the `# --- section ---` heading each is under."""
    path = path or os.path.join(CONFIG_DIR, "default.yaml")
    data = load_yaml(path)
    keys, section = [], None
    with open(path) as f:
        for line in f:
            heading = re.match(r"# --- (.+) ---\s*$", line)
            if heading:
                section = heading.group(1)
                continue
            m = KEY_LINE.match(line)
            if m and m.group(1) in data:
                spec, help_text = m.group(2), (m.group(3) or "").strip()
                name = m.group(1)
                keys.append(Key(name, data[name], spec, help_text, section, "config/default.yaml"))
    return keys


def _declared_beside_defaults(defaults):
    declared = declared_keys()
    for name in declared:
        if name in defaults:
            raise ConfigError(
                f"config key {name!r} is in config/default.yaml and declared by {declared[name].owner}: "
                "keep one"
            )
    return declared


def all_keys():
    """[Key] of every key: default.yaml's in its order, then the declared ones by family, module
    and declaration (not by import order); a name in both is refused."""
    keys = default_file_keys()
    declared = list(_declared_beside_defaults({key.name for key in keys}).values())
    order = {key.name: i for i, key in enumerate(declared)}
    return keys + sorted(declared, key=lambda k: (k.family.lower(), k.owner, order[k.name]))


def load_defaults():
    """Every key with its default: default.yaml's run-wide keys and the declared ones."""
    defaults = load_yaml(os.path.join(CONFIG_DIR, "default.yaml"))
    for name, key in _declared_beside_defaults(defaults).items():
        defaults[name] = copy.deepcopy(key.default)
    return defaults


def section_keys(sections):
    """The top-level keys of default.yaml under the given `# --- <section> ---` headings."""
    return [key.name for key in default_file_keys() if key.family in sections]


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


KEY_LINE = re.compile(r"^(\w+):[^#]*(?:#\s*(?:\{([^}]*)\})?(.*))?$")


def key_specs(path=None):
    """{key: KeySpec} for every key whose declaration (default.yaml's braces, or a component's
    declare_keys) gives a type and range."""
    specs = {}
    for key in default_file_keys(path) if path else all_keys():
        if key.spec:
            specs[key.name] = KeySpec(key.spec)
    return specs


DOCS_PAGE = os.path.join(ROOT, "docs", "configuration.md")
TABLE_START = "<!-- every key: generated from the declarations by `python src/config_keys.py --docs` -->"
TABLE_END = "<!-- end of the generated key table -->"


def _cell(text):
    return str(text).replace("|", "\\|")


def _shown(value):
    if value is None:
        return "null"
    return value if isinstance(value, str) else repr(value)


def key_table():
    """Markdown: every key under its family's heading (and where it is declared), with its
    default, type and range, and help."""
    families = {}
    for key in all_keys():
        families.setdefault(key.family, []).append(key)
    lines = []
    for family, keys in families.items():
        owners = dict.fromkeys(key.owner for key in keys)
        where = ", ".join(o if o.endswith(".yaml") else "src/" + o.replace(".", "/") + ".py" for o in owners)
        lines += ["", f"### {family}", "", f"Declared in {where}.", ""]
        lines += ["| key | default | type and range | what it does |", "|---|---|---|---|"]
        for key in keys:
            default, spec, what = _cell(_shown(key.default)), _cell(key.spec or ""), _cell(key.help)
            lines.append(f"| `{key.name}` | `{default}` | {spec} | {what} |")
    return "\n".join([TABLE_START, *lines, "", TABLE_END])


def write_key_table(page=DOCS_PAGE):
    """Put key_table() between the markers of docs/configuration.md (or at its end)."""
    with open(page) as f:
        text = f.read()
    if TABLE_START in text:
        head, rest = text.split(TABLE_START, 1)
        tail = rest.split(TABLE_END, 1)[1]
        text = head + key_table() + tail
    else:
        text = text.rstrip("\n") + "\n\n## Every key\n\n" + key_table() + "\n"
    with open(page, "w") as f:
        f.write(text)


if __name__ == "__main__":
    import sys

    if sys.argv[1:] != ["--docs"]:
        sys.exit("usage: python src/config_keys.py --docs   (rewrites docs/configuration.md's key table)")
    write_key_table()
