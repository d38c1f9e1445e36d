"""Record classes: dataclass declarations without the start-up cost of `dataclasses`.

A hook runs `memlint check` on every commit, so its start-up is budgeted (bench/speed.py, issue
29). Importing `dataclasses` imports `inspect` (and with it ast, dis, tokenize), which costs
about as much as a bare interpreter's start, and `@dataclass` generates and compiles each method
of each class on its own (about 1 ms a class). The classes a one-file check builds are records:
the same declaration (annotated fields, defaults, `field(default_factory=...)`, `__post_init__`)
compiled into one `__init__` per class; `__repr__`, `__eq__` and `__hash__` are shared functions
over the field values.

    @record(frozen=True)
    class Provenance:
        file: Optional[str] = None
        line: Optional[int] = None

    replace(prov, line=3)      # a copy with some fields changed
    fields(Provenance)         # (Field(name="file", ...), Field(name="line", ...))
    asdict(prov)               # {"file": ..., "line": ...} (nested records too)

What a record does as a dataclass does: an `__init__` with the fields in declaration order (base
records' first), `__repr__` as `Name(field=value, ...)`, `__eq__` between objects of the same
class on the compared fields, and for `frozen=True` immutability and `__hash__` (a mutable record
is unhashable). `slots=True` gives the class `__slots__`. The dataclasses API also takes a record
(`dataclasses.replace`, `fields`, `asdict`, `is_dataclass`): its `__dataclass_fields__` are made
on first use, importing dataclasses then, so code written for dataclasses keeps working and only
it pays that import.
"""
from __future__ import annotations

from operator import attrgetter

__all__ = ["FrozenInstanceError", "Field", "asdict", "field", "fields", "record", "replace"]

_MISSING = object()


class FrozenInstanceError(AttributeError):
    """Assigning to a field of a frozen record."""


class Field:
    """One field of a record: its name, default (or default factory) and whether it is shown by
    `__repr__` and compared by `__eq__` / `__hash__`."""

    __slots__ = ("name", "default", "default_factory", "repr", "compare")

    def __init__(self, default=_MISSING, default_factory=_MISSING, repr: bool = True,
                 compare: bool = True, hash=None):
        self.name = ""
        self.default, self.default_factory = default, default_factory
        self.repr = repr
        self.compare = compare if hash is None else bool(hash) and compare

    def __repr__(self) -> str:
        return f"Field(name={self.name!r})"


def field(*, default=_MISSING, default_factory=_MISSING, repr: bool = True,
          compare: bool = True, hash=None):
    """A field's options, as `dataclasses.field` takes them (the subset memlint uses)."""
    return Field(default, default_factory, repr, compare, hash)


TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    # PEP 681: type checkers read a record as the dataclass it declares (its __init__, fields)
    import sys
    from typing import Any

    if sys.version_info >= (3, 11):
        from typing import dataclass_transform
    else:
        from typing_extensions import dataclass_transform

    @dataclass_transform(field_specifiers=(field, Field))
    def record(cls: Any = None, *, frozen: bool = False, slots: bool = False) -> Any:
        """Make `cls` a record (see the module docstring); `@record` or
        `@record(frozen=True)`."""
else:
    def record(cls=None, *, frozen: bool = False, slots: bool = False):
        """Make `cls` a record (see the module docstring); `@record` or `@record(frozen=True)`."""
        def wrap(klass):
            return _make(klass, frozen, slots)

        return wrap if cls is None else wrap(cls)


def fields(class_or_instance) -> tuple:
    """The record's Fields, in `__init__` order."""
    found = getattr(class_or_instance, "__record_fields__", None)
    if found is None:
        raise TypeError(f"{class_or_instance!r} is not a record")
    return found


def replace(obj, **changes):
    """A new record of `obj`'s class with the given fields changed."""
    values = {f.name: getattr(obj, f.name) for f in fields(obj)}
    values.update(changes)
    return obj.__class__(**values)


def asdict(obj) -> dict:
    """The record's fields as a dict, records inside it (and in lists, tuples, dicts) too."""
    return {f.name: _plain(getattr(obj, f.name)) for f in fields(obj)}


def _plain(value):
    if hasattr(type(value), "__record_fields__"):
        return asdict(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    if isinstance(value, dict):
        return {_plain(k): _plain(v) for k, v in value.items()}
    return value


# ---------------------------------------------------------------------------------------------
# Building the class


def _declared(klass) -> list:
    """Fields of the base records, then the class's own annotated ones."""
    out = {}
    for base in reversed(klass.__mro__[1:]):
        for f in getattr(base, "__record_fields__", ()):
            out[f.name] = f
    for name, annotation in klass.__dict__.get("__annotations__", {}).items():
        if "ClassVar" in str(annotation):
            continue
        value = klass.__dict__.get(name, _MISSING)
        f = value if isinstance(value, Field) else Field(default=value)
        f.name = name
        out[name] = f
    return list(out.values())


def _init_source(names: list, declared: list, frozen: bool, slots: bool,
                 post_init: bool) -> str:
    # the generated code's own names are dunders, which no field is called
    params, body = [], []
    if frozen and not slots:
        body.append("__fields__ = self.__dict__")
    for f in declared:
        n = f.name
        if f.default_factory is not _MISSING:
            params.append(f"{n}=__missing__")
            value = f"__factory_{n}__() if {n} is __missing__ else {n}"
        elif f.default is not _MISSING:
            params.append(f"{n}=__default_{n}__")
            value = n
        else:
            params.append(n)
            value = n
        if frozen and slots:
            body.append(f"__setattr__(self, {n!r}, {value})")
        elif frozen:
            body.append(f"__fields__[{n!r}] = {value}")
        else:
            body.append(f"self.{n} = {value}")
    if post_init:
        body.append("self.__post_init__()")
    return (f"def __init__(self, {', '.join(params)}):\n    "
            + "\n    ".join(body or ["pass"]) + "\n")


class _DataclassFields:
    """`__dataclass_fields__` of a record, made on first use: dataclasses.Field objects, so that
    the dataclasses API takes records too (it finds fields through this attribute and tells
    normal fields by its `_FIELD` marker), and a dataclass may derive from a record."""

    def __get__(self, obj, owner):
        made = owner.__dict__.get("_record_dataclass_fields")
        if made is None:
            # start-up: only code that uses the dataclasses API on a record imports it
            import dataclasses

            made = {}
            for f in owner.__record_fields__:
                made[f.name] = spec = dataclasses.field(
                    default=dataclasses.MISSING if f.default is _MISSING else f.default,
                    default_factory=(dataclasses.MISSING if f.default_factory is _MISSING
                                     else f.default_factory), repr=f.repr, compare=f.compare)
                spec.name, spec._field_type = f.name, dataclasses._FIELD
                spec.kw_only = False
            owner._record_dataclass_fields = made
        return made


class _DataclassParams:
    """`__dataclass_params__` of a record: what @dataclass reads of a base class (frozen)."""

    __slots__ = ("init", "repr", "eq", "order", "unsafe_hash", "frozen")

    def __init__(self, frozen: bool):
        self.init = self.repr = self.eq = True
        self.order = self.unsafe_hash = False
        self.frozen = frozen


def _make(klass, frozen: bool, slots: bool):
    declared = _declared(klass)
    names = [f.name for f in declared]
    if slots and "__slots__" not in klass.__dict__:
        body = {k: v for k, v in klass.__dict__.items()
                if k not in names and k not in ("__dict__", "__weakref__")}
        body["__slots__"] = tuple(names)
        qualname = klass.__qualname__
        klass = type(klass)(klass.__name__, klass.__bases__, body)
        klass.__qualname__ = qualname
    else:
        for f in declared:   # class attributes: the plain defaults, as with dataclasses
            if f.name in klass.__dict__:
                if f.default is _MISSING:
                    delattr(klass, f.name)
                else:
                    setattr(klass, f.name, f.default)
    klass.__init__ = _deferred_init(klass, declared, frozen, slots)
    klass.__signature__ = _Signature()
    klass.__record_fields__ = tuple(declared)
    klass.__dataclass_fields__ = _DataclassFields()
    klass.__dataclass_params__ = _DataclassParams(frozen)
    shown = tuple(f.name for f in declared if f.repr)
    compared = [f.name for f in declared if f.compare]
    klass.__repr__ = _repr_of(shown)
    key = _key_of(compared)
    klass.__eq__ = _eq_of(key)
    if frozen:
        klass.__hash__ = _hash_of(key)
        klass.__setattr__ = _frozen_setattr
        klass.__delattr__ = _frozen_delattr
        if slots:
            klass.__getstate__ = _getstate
            klass.__setstate__ = _setstate
    else:
        klass.__hash__ = None
    return klass


#: Objects a record class makes with the interpreted `__init__` before its own is compiled: in a
#: one-file check most record classes make one or two objects, and compiling an `__init__` costs
#: as much as binding the arguments of a hundred calls in Python.
INTERPRETED_CALLS = 4


def _deferred_init(klass, declared: list, frozen: bool, slots: bool):
    """The class's `__init__` until it is compiled: the first INTERPRETED_CALLS objects get their
    fields bound in Python, as the compiled `__init__` binds them (in declaration order, each
    default factory called in turn); then, or at once for a call it does not bind plainly (too
    many arguments, an unknown or repeated keyword, a required field missing: the compiled one
    raises the TypeError Python gives), the real `__init__` is compiled, put on the class and
    run."""
    names = tuple(f.name for f in declared)
    calls = [0]

    def __init__(self, *args, **kwargs):
        calls[0] += 1
        if calls[0] > INTERPRETED_CALLS or len(args) > len(names):
            return _compiled_init(klass)(self, *args, **kwargs)
        values = {}
        for f, value in zip(declared, args):
            values[f.name] = value
        for name, value in kwargs.items():
            if name in values or name not in names:
                return _compiled_init(klass)(self, *args, **kwargs)
            values[name] = value
        if len(values) < len(names) and not _with_defaults(declared, values):
            return _compiled_init(klass)(self, *args, **kwargs)
        if frozen and slots:
            for f in declared:
                object.__setattr__(self, f.name, _value(f, values))
        elif frozen:
            fields = self.__dict__
            for f in declared:
                fields[f.name] = _value(f, values)
        else:
            for f in declared:
                setattr(self, f.name, _value(f, values))
        if hasattr(klass, "__post_init__"):
            self.__post_init__()

    __init__.__qualname__ = f"{klass.__qualname__}.__init__"
    __init__.__record_init__ = (declared, frozen, slots)
    return __init__


def _with_defaults(declared: list, values: dict) -> bool:
    """Every field not given has a default or a default factory."""
    return all(f.name in values or f.default is not _MISSING or f.default_factory is not _MISSING
               for f in declared)


def _value(f: Field, values: dict):
    if f.name in values:
        return values[f.name]
    if f.default_factory is not _MISSING:
        return f.default_factory()
    return f.default


def _compiled_init(klass):
    """The record class's compiled `__init__` (compiled now if it was not)."""
    init = klass.__dict__["__init__"]
    deferred = getattr(init, "__record_init__", None)
    if deferred is None:
        return init   # compiled already (by another thread, or for a signature)
    declared, frozen, slots = deferred
    scope = {"__missing__": _MISSING, "__setattr__": object.__setattr__}
    for f in declared:
        scope[f"__default_{f.name}__"] = f.default
        scope[f"__factory_{f.name}__"] = f.default_factory
    exec(_init_source([f.name for f in declared], declared, frozen, slots,
                      hasattr(klass, "__post_init__")), scope)
    init = scope["__init__"]
    init.__qualname__ = f"{klass.__qualname__}.__init__"
    klass.__init__ = init
    return init


class _Signature:
    """`__signature__` of a record class (what inspect.signature and help() show): the
    parameters of the `__init__` it runs, a record's compiled when asked for."""

    def __get__(self, obj, owner):
        if obj is not None:
            return None   # an object has no signature of its own (records are not callable)
        for klass in owner.__mro__:
            init = klass.__dict__.get("__init__")
            if init is not None:
                if hasattr(init, "__record_init__"):
                    init = _compiled_init(klass)
                break
        # start-up: only introspection (help(), inspect.signature) imports inspect
        import inspect

        signature = inspect.signature(init)
        return signature.replace(parameters=list(signature.parameters.values())[1:])


def _key_of(names: list):
    """The tuple of `names`' values of an object."""
    if not names:
        return lambda obj: ()
    if len(names) == 1:
        get = attrgetter(names[0])
        return lambda obj: (get(obj),)
    return attrgetter(*names)


def _repr_of(names: tuple):
    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in names)
        return f"{self.__class__.__qualname__}({inner})"

    return __repr__


def _eq_of(key):
    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return key(self) == key(other)
        return NotImplemented

    return __eq__


def _hash_of(key):
    def __hash__(self) -> int:
        return hash(key(self))

    return __hash__


def _frozen_setattr(self, name, value):
    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _frozen_delattr(self, name):
    raise FrozenInstanceError(f"cannot delete field {name!r}")


def _getstate(self):
    return [getattr(self, f.name) for f in self.__record_fields__]


def _setstate(self, state):
    for f, value in zip(self.__record_fields__, state):
        object.__setattr__(self, f.name, value)
