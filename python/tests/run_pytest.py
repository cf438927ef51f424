"""ctest's entry to the module's pytest suite: runs it, or exits 77 (which
ctest reports as skipped) with the reason when pytest or NumPy is missing.

    python3 python/tests/run_pytest.py python/tests   (with PYTHONPATH=build/python)
"""
import importlib.util
import sys

SKIPPED = 77

missing = {module: package for module, package in (("pytest", "python3-pytest"),
                                                   ("numpy", "python3-numpy"))
           if importlib.util.find_spec(module) is None}
if missing:
    print(f"python_module skipped: {', '.join(missing)} not installed for {sys.executable} "
          f"(Debian: apt-get install {' '.join(missing.values())})")
    sys.exit(SKIPPED)

import pytest  # noqa: E402

# Neither a cache directory nor bytecode: the suite must not write into the
# source tree.
sys.dont_write_bytecode = True
sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", *sys.argv[1:]]))
