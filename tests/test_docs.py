"""The documentation: the MkDocs site builds --strict offline, its settings reference is complete, and the
README stays a short front door whose links all land."""

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bot.config import Settings

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
VARIABLES = sorted(field.validation_alias for field in Settings.model_fields.values())


def load_hook():
    """docs/hooks/settings_reference.py as a module (docs/ is not a package)."""
    spec = importlib.util.spec_from_file_location("settings_reference", DOCS / "hooks" / "settings_reference.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """`mkdocs build --strict` in a subprocess, with an explicit environment: (exit code, output, site dir)."""
    tmp = tmp_path_factory.mktemp("docs")
    env = {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}", "HOME": str(tmp),
           "LANG": "C.UTF-8", "NO_MKDOCS_2_WARNING": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    site = tmp / "site"
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    return proc.returncode, proc.stdout + proc.stderr, site


def test_site_builds_strict(built):
    """The site builds with --strict (no broken link or anchor, no page outside the nav) and no network."""
    code, output, _ = built
    assert code == 0, output


def test_settings_reference_lists_every_setting(built):
    """The generated configuration reference names every Settings field by its variable, in the built page too."""
    reference = load_hook().reference_markdown()
    assert [v for v in VARIABLES if f"`{v}`" not in reference] == []
    page = (built[2] / "reference" / "configuration" / "index.html").read_text(encoding="utf-8")
    assert [v for v in VARIABLES if f"<code>{v}</code>" not in page] == []


def test_settings_reference_refuses_an_undocumented_setting(tmp_path):
    """A Settings field missing from .env.example, or a variable Settings does not read, fails the reference."""
    hook = load_hook()
    example = (ROOT / ".env.example").read_text(encoding="utf-8")
    (tmp_path / "missing").write_text(example.replace("\nTUSK_MAX_TASKS=3\n", "\n"))
    (tmp_path / "stale").write_text(example + "\n# A setting Tusk no longer reads.\nTUSK_NOT_A_SETTING=1\n")
    with pytest.raises(hook.ReferenceMismatch, match="TUSK_MAX_TASKS"):
        hook.reference_markdown(tmp_path / "missing")
    with pytest.raises(hook.ReferenceMismatch, match="TUSK_NOT_A_SETTING"):
        hook.reference_markdown(tmp_path / "stale")


def test_readme_is_short_and_its_links_land():
    """README.md has at most 200 lines, and every relative link in it points to a file of the repository."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    links = re.findall(r"\]\(([^)\s]+)\)", text) + re.findall(r'src="([^"]+)"', text)
    relative = [link.split("#")[0] for link in links if not re.match(r"[a-z]+:|#", link)]
    assert relative, "the README links into docs/"
    assert [link for link in relative if not (ROOT / link).exists()] == []


def test_every_docs_page_is_in_the_nav():
    """Each Markdown page under docs/ appears in mkdocs.yml's nav (and the nav names no missing page)."""
    def pages(nav):
        for item in nav:
            for value in (item.values() if isinstance(item, dict) else [item]):
                yield from (pages(value) if isinstance(value, list) else [value])

    in_nav = set(pages(yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]))
    on_disk = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    assert on_disk == in_nav


def test_readme_names_every_chat_command_and_links_backup_restore_import(make_settings):
    """The README's list of what Tusk answers itself names every command a chat has, and its table of pages
    has a row for backup, restore and import (docs/backup.md)."""
    from bot.app import TuskApp

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    answered = next(p for p in text.split("\n\n") if "answered by Tusk itself" in p)
    names = TuskApp(make_settings()).agent.commands.table
    assert len(names) >= 10 and [name for name in names if f"`/{name}`" not in answered] == []
    row = next(line for line in text.splitlines() if "(docs/backup.md)" in line)
    assert all(word in row for word in ("`tusk backup`", "`tusk restore`", "`tusk import`"))
