"""The documentation stays true: every setting read from the environment is on the configuration
page, and every relative link of the READMEs points at a file that exists.

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
