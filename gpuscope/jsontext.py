"""JSON text as the ``json`` package writes and reads it, without importing the package.

``import json`` imports ``re`` (with ``enum``) and compiles json's patterns: ~3 ms of every
``gpuscope run`` on a 2-core runner, and ~11 ms with ``re`` and ``enum`` when nothing else on the
run path needs them (issue 14.4; docs/RUN-ENGINE.md). The run path writes spec.json, summary.json
and the store's JSON columns, and reads the event logs' headers: all of it here, through ``_json``,
the C module that ``json`` itself uses for the same work.

- :func:`dumps` gives ``json.dumps(obj)``'s text, or with ``indent`` ``json.dumps(obj, indent=...)``'s
  (ASCII, keys in their order, ``NaN``/``Infinity`` as json writes them).
- :func:`loads` gives ``json.loads``'s value, for ``str``, ``bytes`` or ``bytearray``;
  :func:`read` and :func:`write` do the same with a file.
- Anything else goes to the ``json`` package itself, so what fails fails with json's own
  exception and words: a value JSON cannot hold (``TypeError``), a circular one (``ValueError``),
  text that is not JSON (``json.JSONDecodeError``), bytes in UTF-16 or UTF-32, an interpreter
  without ``_json``. tests/test_jsontext.py compares both on many values.
"""

from __future__ import annotations

try:
    import _json
except ImportError:  # pragma: no cover - CPython always has it; then json does all of it
    _json = None

TYPE_CHECKING = False
if TYPE_CHECKING:
    import os
    from typing import Any

_WHITESPACE = " \t\n\r"   # what JSON allows around a value


class _ScanContext:
    """What ``_json.make_scanner`` reads of a ``json.JSONDecoder`` with json.loads's defaults."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}.__getitem__


_scan = _json.make_scanner(_ScanContext()) if _json is not None else None


def loads(text: str | bytes | bytearray) -> Any:
    """``json.loads(text)``."""
    if _scan is not None:
        try:
            s = text.decode("utf-8", "surrogatepass") if isinstance(text, (bytes, bytearray)) else text
            if isinstance(s, str) and not s.startswith("\ufeff"):   # json: a BOM is its case
                value, end = _scan(s, len(s) - len(s.lstrip(_WHITESPACE)))
                if not s[end:].strip(_WHITESPACE):
                    return value
        except Exception:  # noqa: BLE001 - json says what is wrong, in its own words
            pass
    import json

    return json.loads(text)


def read(path: str | os.PathLike[str]) -> Any:
    """``loads`` of the file at ``path`` (``OSError`` when it cannot be read)."""
    with open(path, "rb") as fh:
        return loads(fh.read())


def write(path: str | os.PathLike[str], obj: Any, indent: int | None = None) -> None:
    """``dumps(obj, indent)`` into the file at ``path`` (created or replaced)."""
    text = dumps(obj, indent)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)


def _unknown(value: Any) -> Any:
    raise TypeError(f"Object of type {value.__class__.__name__} is not JSON serializable")


def dumps(obj: Any, indent: int | None = None) -> str:
    """``json.dumps(obj)``, or ``json.dumps(obj, indent=indent)``."""
    if _json is not None:
        try:
            if indent is None:
                encode = _json.make_encoder({}, _unknown, _json.encode_basestring_ascii, None, ": ", ", ",
                                            False, False, True)
                return "".join(encode(obj, 0))
            out: list[str] = []
            _indented(obj, " " * indent, 0, out)
            return "".join(out)
        except Exception:  # noqa: BLE001 - json says what it cannot write, in its own words
            pass
    import json

    return json.dumps(obj, indent=indent)


def _float(value: float) -> str:
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    return float.__repr__(value)


def _key(key: Any) -> str:
    """A dict key as json writes it (a string: what is not a str is converted as json does)."""
    if isinstance(key, str):
        return key
    if isinstance(key, float):
        return _float(key)
    if key is True or key is False or key is None:
        return {True: "true", False: "false", None: "null"}[key]
    if isinstance(key, int):
        return int.__repr__(key)
    raise TypeError("key")   # json words it


def _indented(value: Any, pad: str, level: int, out: list[str]) -> None:
    """``value`` as ``json.dumps(value, indent=len(pad))`` writes it, ``level`` deep, onto ``out``."""
    if isinstance(value, str):
        out.append(_json.encode_basestring_ascii(value))
    elif value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        out.append(int.__repr__(value))
    elif isinstance(value, float):
        out.append(_float(value))
    elif isinstance(value, (list, tuple)):
        if not value:
            out.append("[]")
            return
        inner = "\n" + pad * (level + 1)
        out.append("[" + inner)
        for i, item in enumerate(value):
            if i:
                out.append("," + inner)
            _indented(item, pad, level + 1, out)
        out.append("\n" + pad * level + "]")
    elif isinstance(value, dict):
        if not value:
            out.append("{}")
            return
        inner = "\n" + pad * (level + 1)
        out.append("{" + inner)
        for i, (key, item) in enumerate(value.items()):
            if i:
                out.append("," + inner)
            out.append(_json.encode_basestring_ascii(_key(key)) + ": ")
            _indented(item, pad, level + 1, out)
        out.append("\n" + pad * level + "}")
    else:
        raise TypeError("value")   # json words it
