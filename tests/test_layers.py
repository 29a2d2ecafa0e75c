"""The import graph of src/: no circle, and no module importing from a layer above its own
(docs/extending.md). Imports inside functions count too: a lazy import is still a dependency."""

import ast
import os

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
# lowest first; learners and runners are siblings that must not import each other
LAYERS = [
    {"utils"},
    {"components", "modules", "envs"},
    {"controllers"},
    {"learners", "runners"},
    {"config", "config_keys", "validation", "peer_keys", "assembly", "resume", "run"},
    {"main", "sweep", "sweep_archive", "crossplay", "plot", "plotting", "sweeping"},
]
SIBLINGS_APART = {"learners", "runners"}


def modules():
    found = {}
    for root, _, files in os.walk(SRC):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(root, f)
                name = os.path.relpath(path, SRC)[:-3].replace(os.sep, ".")
                found[name.removesuffix(".__init__")] = path
    return found


def imports(found):
    """-> {module: set of src modules it imports}."""

    def resolve(name):
        parts = name.split(".")
        while parts:
            if ".".join(parts) in found:
                return ".".join(parts)
            parts.pop()
        return None

    graph = {}
    for name, path in found.items():
        with open(path) as f:
            tree = ast.parse(f.read())
        package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
        out = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                out |= {resolve(a.name) for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                out |= {resolve(f"{base}.{a.name}") or resolve(base) for a in node.names}
        graph[name] = out - {None, name}
    return graph


def layer(name):
    top = name.split(".")[0]
    for i, members in enumerate(LAYERS):
        if top in members:
            return i
    raise AssertionError(f"src/{top} is in no layer: add it to LAYERS and to docs/extending.md")


def upward(graph):
    return [
        f"{m} -> {d}"
        for m, deps in sorted(graph.items())
        for d in sorted(deps)
        if layer(d) > layer(m) or {m.split(".")[0], d.split(".")[0]} == SIBLINGS_APART
    ]


def circles(graph):
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_every_module_is_in_a_layer_and_imports_only_its_own_or_lower():
    assert upward(imports(modules())) == []


def test_the_import_graph_has_no_circle():
    assert circles(imports(modules())) == []


def test_the_checks_see_a_lazy_upward_import_and_a_circle(tmp_path, monkeypatch):
    # a function-level import from a higher layer, and a circle through a sibling of learners
    (tmp_path / "utils").mkdir()
    (tmp_path / "utils" / "__init__.py").write_text("")
    (tmp_path / "utils" / "a.py").write_text("def f():\n    from run import x\n")
    (tmp_path / "run.py").write_text("from utils.a import f\n")
    (tmp_path / "learners.py").write_text("import runners\n")
    (tmp_path / "runners.py").write_text("")
    monkeypatch.setattr(__import__(__name__), "SRC", str(tmp_path))
    graph = imports(modules())
    assert upward(graph) == ["learners -> runners", "utils.a -> run"]
    assert circles(graph) == [["run", "utils.a"]]


# skirmish's game loop is compiled as one function (numba): splitting it would cost its speed
LONG_ALLOWED = {("envs.skirmish.sim", "run_loops")}
MAX_FUNCTION_LINES = 80


def test_no_function_is_longer_than_80_lines():
    long = []
    for name, path in modules().items():
        with open(path) as f:
            tree = ast.parse(f.read())
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES and (name, node.name) not in LONG_ALLOWED:
                    long.append(f"src/{name.replace('.', '/')}.py {node.name}: {lines} lines")
    assert not long, "split these: " + "; ".join(long)


# sys.path edits that choose other code on purpose: a checkout to profile, a peer framework's
# src, and a bench script loaded in a test as Python runs it (bench/ first, for its siblings)
PATH_EDITS_ALLOWED = {"bench/profile_run.py", "bench/epymarl_update.py", "tests/helpers.py"}


def _edits_sys_path(tree):
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("insert", "append", "extend")
            and ast.unparse(node.func.value) == "sys.path"
        ):
            return True
    return False


def test_no_script_edits_sys_path():
    """src/ is on the path through the project's editable install (requirements.txt's `-e .`)
    and pytest's pythonpath: no module, bench script or test puts it there itself."""
    root = os.path.dirname(SRC)
    found = []
    for folder in ("src", "bench", "tests"):
        for base, _, files in os.walk(os.path.join(root, folder)):
            for f in files:
                path = os.path.join(base, f)
                rel = os.path.relpath(path, root)
                if f.endswith(".py") and rel not in PATH_EDITS_ALLOWED:
                    with open(path) as fh:
                        if _edits_sys_path(ast.parse(fh.read())):
                            found.append(rel)
    assert not found, found
    assert _edits_sys_path(ast.parse("import sys\nsys.path.insert(0, 'src')"))  # the check sees one
