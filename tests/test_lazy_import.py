"""memlint.lazy_import: a module stand-in imports the module when one of its names is read."""
import subprocess
import sys


def test_imported_on_first_attribute_only():
    probe = ("import sys\nfrom memlint import lazy_import\nm = lazy_import.module('colorsys')\n"
             "before = 'colorsys' in sys.modules\nvalue = m.rgb_to_hsv(1, 0, 0)\n"
             "print(before, 'colorsys' in sys.modules, value, m.ONE_THIRD == 1 / 3)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["False", "True", "(0.0,", "1.0,", "1)", "True"]
