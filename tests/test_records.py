"""memlint.records behaves as the dataclasses it replaces on the start-up path (memlint/records.py):
the same __init__, repr, equality, hashing, immutability and replace/fields/asdict."""
import copy
import dataclasses
import pickle
from typing import Optional

import pytest

from memlint.records import FrozenInstanceError, asdict, field, fields, record, replace


@pytest.fixture(autouse=True, params=["compiled", "interpreted"])
def init_kind(request, monkeypatch):
    """Every test twice: objects made by the compiled __init__, and by the interpreted one a
    record class uses for its first objects (memlint/records.py INTERPRETED_CALLS)."""
    from memlint import records

    monkeypatch.setattr(records, "INTERPRETED_CALLS", 0 if request.param == "compiled" else 10**9)
    return request.param


def shown(obj) -> str:
    """repr without the <locals> qualification of a class declared in a test."""
    return repr(obj).rsplit(".", 1)[-1]


def make_point():
    class Point:
        """A point."""

        x: int
        y: int = 2
        tags: list = field(default_factory=list)
        note: Optional[str] = None
    return Point


def make_point_dc():
    class Point:
        """A point."""

        x: int
        y: int = 2
        tags: list = dataclasses.field(default_factory=list)
        note: Optional[str] = None
    return Point


@pytest.mark.parametrize("frozen,slots", [(False, False), (True, False), (True, True),
                                          (False, True)])
def test_same_behaviour_as_a_dataclass(frozen, slots):
    Record = record(frozen=frozen, slots=slots)(make_point())
    Data = dataclasses.dataclass(frozen=frozen, slots=slots)(make_point_dc())
    r, d = Record(1, tags=["a"]), Data(1, tags=["a"])
    assert shown(r) == shown(d) == "Point(x=1, y=2, tags=['a'], note=None)"
    assert repr(r).replace("make_point.", "make_point_dc.") == repr(d)
    assert (r.x, r.y, r.tags, r.note) == (d.x, d.y, d.tags, d.note)
    assert Record(1) == Record(1, 2) and Record(1) != Record(2) and Record(1) != (1, 2, [], None)
    assert Record(1).tags is not Record(1).tags          # a fresh default per object
    assert [f.name for f in fields(Record)] == [f.name for f in dataclasses.fields(Data)]
    if not slots:
        assert Record.y == Data.y == 2                   # plain defaults stay class attributes
    assert replace(r, y=5) == Record(1, 5, ["a"]) and r.y == 2
    assert asdict(r) == dataclasses.asdict(d)
    with pytest.raises(TypeError):
        Record()                                         # x is required
    with pytest.raises(TypeError):
        replace(r, z=1)
    if frozen:
        assert hash(Record(1, tags=())) == hash(Record(1, tags=()))
        with pytest.raises(FrozenInstanceError):
            r.x = 3
        with pytest.raises(AttributeError):
            del r.x
    else:
        r.x = 3
        assert r.x == 3
        with pytest.raises(TypeError):
            hash(r)
    if slots:
        assert not hasattr(r, "__dict__") and Record.__slots__ == ("x", "y", "tags", "note")
    assert copy.copy(r) == r and copy.deepcopy(r) == r


@record(frozen=True, slots=True)
class Where:
    file: Optional[str] = None
    line: Optional[int] = None


def test_a_frozen_slots_record_pickles_and_copies():
    where = Where("a.json", 3)
    assert pickle.loads(pickle.dumps(where)) == where == copy.deepcopy(where)
    assert repr(where) == "Where(file='a.json', line=3)"


def test_post_init_compare_and_repr_options():
    @record(frozen=True)
    class Item:
        name: str
        cache: dict = field(default_factory=dict, repr=False, compare=False)

        def __post_init__(self):
            self.cache["seen"] = self.name

    item = Item("a")
    assert item.cache == {"seen": "a"} and shown(item) == "Item(name='a')"
    assert Item("a") == Item("a", {"other": 1}) and hash(Item("a")) == hash(Item("a", {"x": 1}))


def test_fields_may_have_any_name():
    @record(frozen=True)
    class Odd:
        d: int = 1
        self_: int = 2
        _MISSING: int = 3

    assert (Odd().d, Odd(5).d, Odd(_MISSING=4)._MISSING) == (1, 5, 4)


def test_inherits_the_fields_of_a_base_record():
    @record
    class Base:
        a: int = 1

    @record
    class Child(Base):
        b: int = 2

    assert Child(3, 4).a == 3 and [f.name for f in fields(Child)] == ["a", "b"]
    assert shown(Child()) == "Child(a=1, b=2)"


def test_the_dataclasses_api_takes_a_record():
    @record(frozen=True)
    class Plain:
        a: int = 1
        b: list = field(default_factory=list)

    plain = Plain(2, [Where("x", 1)])
    assert dataclasses.is_dataclass(plain) and dataclasses.replace(plain, a=3) == Plain(3, plain.b)
    assert [f.name for f in dataclasses.fields(Plain)] == ["a", "b"]
    assert dataclasses.asdict(plain) == {"a": 2, "b": [{"file": "x", "line": 1}]} == asdict(plain)
    with pytest.raises(TypeError):
        fields(object())


def test_a_dataclass_may_derive_from_a_record():
    @record(frozen=True)
    class Base:
        a: int
        b: list = field(default_factory=list)

    @dataclasses.dataclass(frozen=True)
    class Derived(Base):
        c: int = 3

    derived = Derived(1)
    assert (derived.a, derived.b, derived.c) == (1, [], 3) and Derived(1, [2], 4).b == [2]
    assert dataclasses.replace(derived, c=5).c == 5 and isinstance(derived, Base)
    with pytest.raises(dataclasses.FrozenInstanceError):
        derived.a = 2


def test_init_is_compiled_when_the_first_objects_are_made(init_kind, monkeypatch):
    """A record's __init__ is compiled after its first objects (start-up: most records a run
    declares make a few objects or none); inspect.signature shows the fields before and after,
    as for a dataclass; a call the interpreted __init__ does not bind plainly gets the compiled
    one's TypeError."""
    import inspect

    from memlint import records

    monkeypatch.setattr(records, "INTERPRETED_CALLS", 2)
    Record = record(frozen=True, slots=True)(make_point())
    Data = dataclasses.dataclass(frozen=True, slots=True)(make_point_dc())
    assert hasattr(Record.__dict__["__init__"], "__record_init__")   # not compiled yet
    assert list(inspect.signature(Record).parameters) == list(inspect.signature(Data).parameters)
    Other = record(make_point())
    first, second = Other(1), Other(x=1, note="n")
    assert hasattr(Other.__dict__["__init__"], "__record_init__")
    third = Other(1)
    assert not hasattr(Other.__dict__["__init__"], "__record_init__")   # compiled, on the class
    assert first == third and second != first and Other(1, 3) != first
    for call, message in ((lambda k: k(), "missing 1 required positional argument: 'x'"),
                          (lambda k: k(1, 2, [], None, 5), "takes from 2 to 5 positional"),
                          (lambda k: k(1, x=2), "multiple values for argument 'x'"),
                          (lambda k: k(1, z=2), "unexpected keyword argument 'z'")):
        Fresh = record(make_point())
        with pytest.raises(TypeError, match=message):
            call(Fresh)
