"""Importing possym leaves the caller's world as it was: every module imports, none picks a backend."""

import subprocess
import sys

# Run in a fresh interpreter: the test session has imported matplotlib and possym already.
SCRIPT = """
import importlib, pkgutil
import matplotlib
matplotlib.use("svg")  # the caller's choice, and not the Agg that a plot module used to force
import possym
names = [m.name for m in pkgutil.walk_packages(possym.__path__, "possym.") if m.name != "possym.__main__"]
for name in names:
    importlib.import_module(name)
print(len(names), matplotlib.get_backend())
"""


def test_importing_every_module_leaves_the_matplotlib_backend_alone():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    n_modules, backend = out.stdout.split()
    assert int(n_modules) > 50
    assert backend == "svg"
