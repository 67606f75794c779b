"""The README's module table names every module of the package, and no module that is gone."""
import pathlib, re

ROOT = pathlib.Path(__file__).resolve().parents[1]

def test_module_table_matches_the_tree():
  readme = (ROOT / "README.md").read_text()
  named = set(re.findall(r"^\| `([a-z_/0-9]+\.py)` \|", readme, re.M))
  groups = set(re.findall(r"^\| \*\*([a-z_/]+)/\*\* \|", readme, re.M))   # a package's own row stands for its __init__.py
  tree = {str(p.relative_to(ROOT / "tinygrad_vk")) for p in (ROOT / "tinygrad_vk").rglob("*.py")}
  tree -= {f"{g}/__init__.py" for g in groups}
  assert named == tree, f"not in the README: {sorted(tree - named)}, gone: {sorted(named - tree)}"
