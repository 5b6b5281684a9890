"""The dependency rule (docs/architecture.md): apps depend downward only, modules import no cycle, and a
function-local import of the project's own code says why it is there.

- The layers are import-linter's contract in pyproject.toml (``[tool.importlinter]``): project wiring
  -> the MCP and Slack surfaces -> group discussions (their members talk through the 1:1 engine) and
  approval requests -> 1:1 conversations -> tool gating and the schedule store (independent of each
  other) -> the HITL core -> the shared base. Every import counts, function-local ones included, and
  indirect chains too.
- A planted upward import inside a function breaks the contract (the rule can fail).
- No two modules import each other, directly or through others (TYPE_CHECKING imports aside: they
  do not run). A cycle hidden behind a function-local import counts as a cycle.
- A function-local import of project code carries a comment ``# local import: <reason>`` on the line
  above it. ``apps.py`` modules are the exception Django sets: an app's models and the modules that use
  them may be imported only once the app registry is ready (``AppConfig.ready`` and the receivers it
  connects).
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = (
    "hitl_project",
    "common",
    "approvals",
    "schedules",
    "toolgate",
    "conversations",
    "groups",
    "approval_requests",
    "mcp_surface",
    "slack_surface",
)
LOCAL_IMPORT_REASON = "# local import:"


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(Path(sys.executable).with_name("lint-imports")), "--no-cache"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
    )


def test_apps_depend_downward_only():
    linted = lint_imports(ROOT)
    assert linted.returncode == 0, linted.stdout + linted.stderr
    assert "BROKEN" not in linted.stdout and " KEPT" in linted.stdout, linted.stdout


def test_a_planted_upward_import_breaks_the_rule(tmp_path: Path):
    for package in (*PACKAGES, "harnesses"):
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    with open(tmp_path / "approvals" / "decisions.py", "a") as decisions:
        decisions.write(
            "\n\ndef _planted():\n    from conversations.models import Conversation\n\n    return Conversation\n"
        )

    linted = lint_imports(tmp_path)

    assert linted.returncode != 0, linted.stdout
    assert "BROKEN" in linted.stdout and "approvals.decisions -> conversations.models" in linted.stdout, (
        linted.stdout
    )


def _cycles(imports: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in imports.get(module, ()):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(imports):
        if module not in index:
            visit(module)
    return found


def test_no_module_imports_itself_through_others(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    graph = grimp.build_graph(*PACKAGES, cache_dir=None, exclude_type_checking_imports=True)
    modules = {m for m in graph.modules if ".migrations" not in m}
    imports = {m: graph.find_modules_directly_imported_by(m) & modules for m in modules}

    assert _cycles(imports) == []


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _function_local_imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text())
    found = []
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            found += [(node.lineno, name) for name in names if name.split(".")[0] in PACKAGES]
    return found


def test_a_function_local_import_of_project_code_says_why():
    unexplained = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" in path.parts or path.name == "apps.py":
                continue
            lines = path.read_text().splitlines()
            for lineno, name in _function_local_imports(path):
                above = lines[lineno - 2].strip() if lineno >= 2 else ""
                if (
                    not above.startswith(LOCAL_IMPORT_REASON)
                    or not above.removeprefix(LOCAL_IMPORT_REASON).strip()
                ):
                    unexplained.append(f"{path.relative_to(ROOT)}:{lineno}: {name}")
    assert unexplained == []
