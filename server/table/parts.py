"""The pickled form of a room and its parts, the same whether the table core is compiled or not.

Theory of operation
-------------------
``blackdrez compile --core`` compiles the table core with Cython, and the ``.pxd`` file beside
``room.py``, ``seating.py``, ``timers.py`` and ``history.py`` makes their classes
(:class:`~blackdrez.server.table.room.Room`, ``Seating``, ``Roster``, ``Timers``, ``EventLog``)
extension types there: their attributes are fields of a C struct that the compiled methods read
directly, where a plain class's are read through Python's generic attribute lookup (a fifth of a
compiled node's time went there). Without compiling, the ``.pxd`` files are not read and the
classes are plain Python, as before.

A snapshot is the pickle of a room (:mod:`blackdrez.server.table.snapshots`): written by one
node, read by another, compiled or not, and by this code from a snapshot of any earlier
version. So the room and its parts pickle the same way in both builds, as a plain class always
has: the class, created without ``__init__``, and a dictionary of its attributes
(:func:`reduce`, which the snapshots' pickler uses for them; compiled, any other pickling of
them is refused, Cython's own being off); unpickling sets each attribute back (each class's
``__setstate__``: :func:`restore`), after the defaults of those that earlier versions did not
have. An extension type keeps its declared attributes in C fields, which :func:`reduce` reads by
the names its ``.pxd`` file declares: every attribute its ``__init__`` sets (a test checks each
class). Only ``Room`` also has an instance dictionary (the tests' harness wraps its methods
there); the others refuse an attribute they do not declare, compiled.
"""

from __future__ import annotations

import copyreg
import importlib.resources
import re
import sys
from collections.abc import Mapping
from typing import Any

_NEWOBJ = copyreg.__newobj__  # type: ignore[attr-defined]  # (pickle writes it as NEWOBJ)
_DECLARED = re.compile(r"^cdef class (\w+)|^\s+cdef public \w+ ([\w, ]+)$", re.MULTILINE)


def declared(module: str) -> dict[str, tuple[str, ...]]:
    """The attributes the ``.pxd`` file of ``module`` (a dotted name) declares, by class."""
    package, _, name = module.rpartition(".")
    text = importlib.resources.files(package).joinpath(f"{name}.pxd").read_text()
    fields: dict[str, tuple[str, ...]] = {}
    cls = ""
    for match in _DECLARED.finditer(text):
        if match.group(1):
            cls = match.group(1)
            fields[cls] = ()
        else:
            fields[cls] += tuple(part.strip() for part in match.group(2).split(","))
    return fields


_fields: dict[type, tuple[str, ...]] = {}
"""The declared attributes of each class :func:`reduce` reduces (:func:`register`)."""


def register(*classes: type) -> None:
    """Let :func:`reduce` reduce ``classes``: read what their ``.pxd`` files declare, if they
    are compiled (at import: not on the way of a snapshot)."""
    for cls in classes:
        plain = str(getattr(sys.modules[cls.__module__], "__file__", "")).endswith(".py")
        _fields[cls] = () if plain else declared(cls.__module__)[cls.__name__]


def reduce(obj: Any) -> tuple[Any, ...]:
    """How the snapshots' pickler reduces the room and its parts (:func:`register`): as
    ``pickle`` does a plain object, the class and every attribute (a plain object's instance
    dictionary; an extension type's declared fields, and its instance dictionary's if it has
    one)."""
    cls = type(obj)
    found = dict(getattr(obj, "__dict__", ()))
    for name in _fields[cls]:
        found[name] = getattr(obj, name)
    return _NEWOBJ, (cls,), found


def restore(
    obj: Any, pickled: Mapping[str, Any], defaults: Mapping[str, Any] | None = None
) -> None:
    """``__setstate__``: ``defaults`` (of attributes older versions lacked), then ``pickled``.
    A special name (``__class__``...) is refused: set as an attribute it would change what the
    object is, where a plain object's dictionary only held it (the snapshot is not used)."""
    for name, value in (defaults or {}).items():
        setattr(obj, name, value)
    for name, value in pickled.items():
        if name.startswith("__"):
            raise ValueError(f"a pickled {type(obj).__name__} may not set {name}")
        setattr(obj, name, value)
