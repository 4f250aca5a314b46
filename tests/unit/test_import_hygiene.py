"""probes/ and loader/ stay free of the UI: no textual, no rich (as harlequin enforces)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
UI_FREE = ("base", "connection", "toolchain", "probes", "loader", "session", "lab")
FORBIDDEN = ("textual", "rich", "textual_plotext", "plotext")
# httpx's own package __init__ imports its command-line module, which loads rich
# whenever rich is installed; so the transitive check covers the Textual stack only,
# and the statement check above covers rich in our own code.
FORBIDDEN_TRANSITIVELY = ("textual", "textual_plotext", "plotext")


def _modules(package: str) -> list[str]:
    return sorted(
        ".".join(("crdscope", *path.relative_to(ROOT).with_suffix("").parts))
        for path in (ROOT / package).rglob("*.py")
        if path.name != "__init__.py" or path.parent != ROOT / package
    )


def test_no_ui_import_statements():
    offenders = []
    for package in UI_FREE:
        for path in (ROOT / package).rglob("*.py"):
            tree = ast.parse(path.read_text(), str(path))
            for node in ast.walk(tree):
                names = []
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    names = [node.module]
                for name in names:
                    if name.split(".")[0] in FORBIDDEN:
                        offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {name}")
    assert not offenders, "\n".join(offenders)


def test_importing_every_module_loads_no_ui_library():
    modules = [m for package in UI_FREE if (ROOT / package).is_dir() for m in _modules(package)]
    assert any(m.startswith("crdscope.probes.") for m in modules)
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN_TRANSITIVELY!r})\n"
        "print(','.join(bad))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "", f"UI libraries loaded transitively: {done.stdout.strip()}"
