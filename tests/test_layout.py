"""The layout: no import circles between the modules of bot/ (ARCHITECTURE.md's dependency direction).

Every import of a bot.* module counts: at the top, inside functions, under `if TYPE_CHECKING:` (a type
that has to come from a module that imports you is a circle in the design even if Python never runs
it), relative ones, and `from bot.pkg import name` as the submodule `name` when it is one. A circle is
broken by moving the shared piece down into a module both sides import, not by hiding an import in a
function.
"""

import ast
from pathlib import Path

BOT = Path(__file__).resolve().parent.parent / "bot"

# Circles still to untangle, each as the set of modules that form it. Empty this list as they go; an entry
# that no longer matches a circle fails test_every_allowed_circle_still_exists, so none outlives its reason.
ALLOWED_CIRCLES: list[frozenset[str]] = []  # none left: a new circle is untangled, not listed here


def modules(*roots: Path) -> dict[str, Path]:
    """Every module under bot/ (or `roots`), by dotted name (a package by its own name, for its __init__.py)."""
    found = {}
    for path in sorted(p for root in roots or (BOT,) for p in root.rglob("*.py")):
        parts = path.relative_to(BOT.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The bot.* modules that module `name` imports anywhere in its source."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            targets = [f"{source}.{alias.name}" if f"{source}.{alias.name}" in known else source
                       for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:  # `import bot.x.y` of a name inside bot.x.y: that module
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


def graph(*roots: Path) -> dict[str, set[str]]:
    known = modules(*roots)
    return {name: imports(name, path, known) for name, path in known.items()}


def circles(edges: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def one_cycle(edges: dict[str, set[str]], component: frozenset[str]) -> list[str]:
    """A shortest way round the circle, from its first module back to it: ["bot.a", "bot.b", "bot.a"]."""
    start = min(component)
    paths = {start: [start]}
    queue = [start]
    for node in queue:
        for child in sorted(edges[node] & component):
            if child == start:
                return paths[node] + [start]
            if child not in paths:
                paths[child] = paths[node] + [child]
                queue.append(child)
    raise AssertionError(f"{sorted(component)} is not a circle")


def test_bot_has_no_import_circles():
    """No module of bot/ imports, directly or through others, a module that imports it back."""
    edges = graph()
    found = [c for c in circles(edges) if c not in ALLOWED_CIRCLES]
    report = [f"{' -> '.join(one_cycle(edges, c))}   (all tied in it: {', '.join(sorted(c))})" for c in found]
    assert not found, "import circles in bot/ (move the shared piece down into a module both import):\n" + \
        "\n".join(report)


def test_channels_and_memory_have_no_import_circles():
    """No module of channels/ or memory/ is tied in an import circle, with each other or with bot/ (the
    intake chain, the adapters and the contract they keep import one way)."""
    edges = graph(BOT, BOT.parent / "channels", BOT.parent / "memory")
    found = [c for c in circles(edges) if c not in ALLOWED_CIRCLES]
    assert not found, "import circles:\n" + "\n".join(" -> ".join(one_cycle(edges, c)) for c in found)


def test_every_allowed_circle_still_exists():
    """An allowed circle that has been untangled is taken off ALLOWED_CIRCLES."""
    existing = circles(graph())
    stale = [sorted(c) for c in ALLOWED_CIRCLES if c not in existing]
    assert not stale, f"no longer circles (remove them from ALLOWED_CIRCLES): {stale}"


def test_the_walk_sees_function_level_and_relative_imports(tmp_path):
    """The import reader finds imports inside functions, relative ones, and `from pkg import submodule`."""
    package = tmp_path / "bot" / "pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("from . import b\n")
    (package / "a.py").write_text("def f():\n    from bot.pkg import b\n    import bot.c\n")
    (package / "b.py").write_text("from .a import f\nfrom bot import c\n")
    known = {"bot.pkg": package / "__init__.py", "bot.pkg.a": package / "a.py", "bot.pkg.b": package / "b.py",
             "bot.c": tmp_path / "bot" / "c.py"}
    assert imports("bot.pkg", known["bot.pkg"], known) == {"bot.pkg.b"}
    assert imports("bot.pkg.a", known["bot.pkg.a"], known) == {"bot.pkg.b", "bot.c"}
    assert imports("bot.pkg.b", known["bot.pkg.b"], known) == {"bot.pkg.a", "bot.c"}
    edges = {name: imports(name, path, known) for name, path in known.items() if path.exists()} | {"bot.c": set()}
    assert circles(edges) == [frozenset({"bot.pkg.a", "bot.pkg.b"})]
    assert one_cycle(edges, circles(edges)[0]) == ["bot.pkg.a", "bot.pkg.b", "bot.pkg.a"]
