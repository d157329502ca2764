"""The documentation stays true: every setting read from the environment is on the configuration
page, every module of the apps is on the layout page (and every module it names exists), and every
relative link of the READMEs points at a file that exists.

The site itself is built with `mkdocs build --strict` in .ci/run (broken links between pages,
pages missing from the nav)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SETTINGS = ROOT / "crowdnotes_site" / "settings.py"
ENV_HELPERS = ROOT / "crowdnotes_site" / "env.py"
CONFIGURATION = ROOT / "docs" / "operations" / "configuration.md"
LAYOUT = ROOT / "docs" / "architecture" / "layout.md"
APPS = ("crowdnotes_site", "evidence", "judging", "notes", "xnotes")


def _env_helper_names() -> set[str]:
    """The typed readers of crowdnotes_site/env.py (env_str, env_int, ...), so a new one is covered too."""
    tree = ast.parse(ENV_HELPERS.read_text())
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef) and node.name.startswith("env_")}


def _is_os_environ(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ" and isinstance(node.value, ast.Name)


def environment_reads(source: str, helpers: set[str]) -> tuple[set[str], set[str]]:
    """(variable names, name prefixes) a settings module reads from the environment.

    Names: the first argument of every env_* helper call, of os.environ.get / os.getenv, and every
    os.environ["NAME"]. Prefixes: `name.startswith("PREFIX")` inside a loop over os.environ (a family
    of variables such as LLM_MODEL_<TASK>). A name that is not a string literal fails: the page
    could not be checked against it."""
    tree = ast.parse(source)
    names: set[str] = set()
    prefixes: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            reads_env = (isinstance(func, ast.Name) and func.id in helpers) or (
                isinstance(func, ast.Attribute)
                and (
                    (func.attr == "get" and _is_os_environ(func.value))
                    or (func.attr == "getenv" and isinstance(func.value, ast.Name) and func.value.id == "os")
                )
            )
            if reads_env:
                first = node.args[0] if node.args else None
                assert isinstance(first, ast.Constant) and isinstance(first.value, str), (
                    f"settings.py line {node.lineno}: read the environment with a literal variable name"
                )
                names.add(first.value)
        elif isinstance(node, ast.Subscript) and _is_os_environ(node.value):
            key = node.slice
            assert isinstance(key, ast.Constant) and isinstance(key.value, str), f"line {node.lineno}"
            names.add(key.value)
        elif isinstance(node, ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp | ast.For):
            loops = node.generators if not isinstance(node, ast.For) else [node]
            if any(_is_os_environ(n) for loop in loops for n in ast.walk(loop.iter)):
                for call in ast.walk(node):
                    if (
                        isinstance(call, ast.Call)
                        and isinstance(call.func, ast.Attribute)
                        and call.func.attr == "startswith"
                        and call.args
                        and isinstance(call.args[0], ast.Constant)
                        and isinstance(call.args[0].value, str)
                    ):
                        prefixes.add(call.args[0].value)
    return names, prefixes


def _documented(page: str) -> str:
    """The table rows of the configuration page (a variable counts as documented only in a row)."""
    return "\n".join(line for line in page.splitlines() if line.startswith("|"))


def test_the_reader_finds_every_kind_of_environment_read() -> None:
    source = """
import os
from crowdnotes_site.env import env_int, env_str
A = env_str("ALPHA", "")
B = env_int("BETA", 3, minimum=1)
C = os.environ.get("GAMMA", "x")
D = os.environ["DELTA"]
E = {name[len("FAM_"):]: value for name, value in os.environ.items() if name.startswith("FAM_")}
F = "NOT_AN_ENV_READ"
"""
    names, prefixes = environment_reads(source, {"env_int", "env_str"})
    assert names == {"ALPHA", "BETA", "GAMMA", "DELTA"}
    assert prefixes == {"FAM_"}


def test_a_computed_variable_name_is_refused() -> None:
    with pytest.raises(AssertionError, match="literal variable name"):
        environment_reads('from crowdnotes_site.env import env_str\nX = env_str("A" + "B", "")\n', {"env_str"})


def test_every_setting_read_from_the_environment_is_on_the_configuration_page() -> None:
    names, prefixes = environment_reads(SETTINGS.read_text(), _env_helper_names())
    assert len(names) > 100, "the settings reader found too few variables: has settings.py changed how it reads?"
    rows = _documented(CONFIGURATION.read_text())
    missing = sorted(name for name in names if f"`{name}`" not in rows)
    assert not missing, f"add these variables to docs/operations/configuration.md (name, default, meaning): {missing}"
    missing_families = sorted(prefix for prefix in prefixes if f"`{prefix}<" not in rows)
    assert not missing_families, f"document these variable families as `PREFIX<NAME>`: {missing_families}"


_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def relative_links(markdown: str) -> list[str]:
    """The link and image targets of a Markdown text that point into the repository (no scheme,
    no pure #anchor), without their #fragment."""
    targets = []
    for target in _LINK.findall(markdown):
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue
        targets.append(target.split("#", 1)[0])
    return targets


def test_relative_links_are_found_and_urls_are_not() -> None:
    text = "![shot](docs/a.png) [site](https://example.org/x) [here](#top) [page](docs/b.md#part) <http://x>"
    assert relative_links(text) == ["docs/a.png", "docs/b.md"]


@pytest.mark.parametrize("readme", ["README.md", "bench/README.md"])
def test_every_relative_link_of_the_readmes_resolves(readme: str) -> None:
    path = ROOT / readme
    links = relative_links(path.read_text())
    if readme == "README.md":
        assert links, "the README links into the documentation"
    broken = [link for link in links if not (path.parent / link).exists()]
    assert not broken, f"{readme}: links to missing files: {broken}"


def _holds_code(path: Path) -> bool:
    """More than a docstring: an empty package __init__.py is named by its folder, not by itself."""
    body = ast.parse(path.read_text()).body
    return any(not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)) for node in body)


def app_modules(root: Path = ROOT) -> set[str]:
    """The modules of the apps and crowdnotes_site that the layout page must name, as paths from the
    root: every .py file outside migrations/, tests/ and __pycache__/, but an __init__.py only when
    it holds code."""
    modules = set()
    for app in APPS:
        for path in (root / app).rglob("*.py"):
            parts = path.relative_to(root).parts
            if {"migrations", "tests", "__pycache__"} & set(parts):
                continue
            if path.name == "__init__.py" and not _holds_code(path):
                continue
            modules.add("/".join(parts))
    return modules


_FOLDER = re.compile(r"^( *)(\S+/)(?:\s|$)")
_MODULE = re.compile(r"[\w/]+\.py\b")


def layout_modules(markdown: str, root: Path = ROOT) -> tuple[set[str], set[str]]:
    """(modules named, names that match no file) by the first fenced block of the layout page.

    The block is a tree: a line whose first word ends in "/" opens that folder inside the folder of
    the nearest line above it that is indented less and opened one; every `name.py` on a line
    belongs to the folder the line sits in (its own, for a folder's line), else it is a path from
    the root (`crowdnotes_site/panels.py` in another folder's text)."""
    block = markdown.split("```", 2)[1]
    named: set[str] = set()
    unknown: set[str] = set()
    folders: list[tuple[int, str]] = []  # (indent, folder from the root), innermost last
    for line in block.splitlines():
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        while folders and folders[-1][0] >= indent:
            folders.pop()
        opened = _FOLDER.match(line)
        if opened:
            parent = folders[-1][1] if folders else ""
            folders.append((indent, parent + opened.group(2)))
        here = folders[-1][1] if folders else ""
        for name in _MODULE.findall(line[opened.end(2) if opened else 0 :]):
            name = name.lstrip("/")
            found = next((path for path in (here + name, name) if (root / path).is_file()), None)
            if found is None:
                unknown.add(here + name)
            else:
                named.add(found)
    return named, unknown


def test_the_layout_reader_follows_the_tree(tmp_path: Path) -> None:
    for path in ("app/models.py", "app/sub/pure.py", "app/sub/deeper/leaf.py", "app/views.py", "site/panels.py"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("")
    page = """# Layout

```
app/          the app
  models.py     rows; views.py beside them
  sub/          pure.py (a pure core), and
                deeper/leaf.py, with site/panels.py from the root
    gone.py       removed since
```
"""
    named, unknown = layout_modules(page, tmp_path)
    assert named == {"app/models.py", "app/views.py", "app/sub/pure.py", "app/sub/deeper/leaf.py", "site/panels.py"}
    assert unknown == {"app/sub/gone.py"}


def test_an_empty_package_init_is_not_a_module_to_name(tmp_path: Path) -> None:
    for app in APPS:
        (tmp_path / app / "migrations").mkdir(parents=True)
        (tmp_path / app / "migrations" / "0001_initial.py").write_text("x = 1\n")
    (tmp_path / "notes" / "__init__.py").write_text('"""The notes app."""\n')
    (tmp_path / "notes" / "models").mkdir()
    (tmp_path / "notes" / "models" / "__init__.py").write_text("from notes.models.posts import Post\n")
    (tmp_path / "notes" / "models" / "posts.py").write_text("")
    assert app_modules(tmp_path) == {"notes/models/__init__.py", "notes/models/posts.py"}


def test_every_module_of_the_apps_is_on_the_layout_page() -> None:
    modules = app_modules()
    assert len(modules) > 150, "the module finder found too few modules: has the tree moved?"
    named, _ = layout_modules(LAYOUT.read_text())
    missing = sorted(modules - named)
    assert not missing, (
        f"name these modules in docs/architecture/layout.md (what each holds, in a few words): {missing}"
    )


def test_every_module_the_layout_page_names_exists() -> None:
    _, unknown = layout_modules(LAYOUT.read_text())
    assert not unknown, f"docs/architecture/layout.md names modules that do not exist: {sorted(unknown)}"
