"""The fuzz oracle, its mutators and generators (a package, so that bench/fuzz.py on sys.path
cannot hide it: a namespace portion loses to any module of the same name)."""
