"""Framework facts read from the frameworks' own source (names, defaults, which keys a code path
reads), each kept in one place so that adapters, the memory model and rules share it without
importing one another."""
