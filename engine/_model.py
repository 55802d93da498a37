"""A small, dependency-free stand-in for the parts of pydantic v2 that the engine's models expose.

The reference engine declares ``SimpleAction``, ``ComplexAction``, ``ActionInput``, ``FrameData`` and
``FrameDataRaw`` as pydantic models.  Games only construct them and read fields; the toolkit also
calls ``model_dump``, ``model_dump_json``, ``model_validate`` and ``model_validate_json``.  This module
reproduces that surface (default model config: unknown keywords ignored, assignment not validated,
lax coercion of numbers) with the standard library only, so the engine keeps to numpy + stdlib.

``ValidationError`` subclasses ``ValueError`` like pydantic's does, so ``except ValueError`` works
the same way; code that catches ``pydantic.ValidationError`` by class will not catch ours.
"""

from __future__ import annotations

import copy
import json
import numbers
from collections.abc import Callable
from typing import Any

from ._copying import copy_state, keep_alive, register_copier


class ValidationError(ValueError):
    """Raised when model input does not validate; ``errors()`` lists the problems like pydantic."""

    def __init__(self, title: str, errors: list[dict[str, Any]]) -> None:
        self._title = title
        self._errors = errors
        lines = [f"{len(errors)} validation error{'s' if len(errors) != 1 else ''} for {title}"]
        for err in errors:
            loc = ".".join(str(part) for part in err["loc"])
            lines.append(loc)
            lines.append(f"  {err['msg']} [type={err['type']}, input_value={err['input']!r}]")
        super().__init__("\n".join(lines))

    @property
    def title(self) -> str:
        return self._title

    def errors(self) -> list[dict[str, Any]]:
        return [dict(err) for err in self._errors]

    def error_count(self) -> int:
        return len(self._errors)


class FieldError(Exception):
    """Internal: one failed field check (type code + message, as pydantic reports them)."""

    def __init__(self, kind: str, msg: str) -> None:
        super().__init__(msg)
        self.kind = kind
        self.msg = msg


# ----------------------------------------------------------------------------------------------
# Lax coercions (pydantic v2 "lax mode" behaviour for the field types the models use)
# ----------------------------------------------------------------------------------------------

def coerce_int(value: Any) -> int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise FieldError("finite_number", "Input should be a finite number")
        if value != int(value):
            raise FieldError("int_from_float", "Input should be a valid integer, got a number with a fractional part")
        return int(value)
    if isinstance(value, (str, bytes, bytearray)):
        text = value.decode() if isinstance(value, (bytes, bytearray)) else value
        try:
            return int(text.strip())
        except ValueError:
            raise FieldError("int_parsing", "Input should be a valid integer, unable to parse string as an integer") from None
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return coerce_int(float(value))
    raise FieldError("int_type", "Input should be a valid integer")


def coerce_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, numbers.Integral) and int(value) in (0, 1):
        return bool(int(value))
    if isinstance(value, float) and value in (0.0, 1.0):
        return bool(value)
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("1", "true", "t", "yes", "y", "on"):
            return True
        if text in ("0", "false", "f", "no", "n", "off"):
            return False
    raise FieldError("bool_parsing", "Input should be a valid boolean")


def coerce_str(value: Any) -> str:
    if isinstance(value, str):
        return value
    raise FieldError("string_type", "Input should be a valid string")


def bounded_int(low: int, high: int) -> Callable[[Any], int]:
    def check(value: Any) -> int:
        number = coerce_int(value)
        if number < low:
            raise FieldError("greater_than_equal", f"Input should be greater than or equal to {low}")
        if number > high:
            raise FieldError("less_than_equal", f"Input should be less than or equal to {high}")
        return number

    return check


def int_list(value: Any) -> list[int]:
    if isinstance(value, (list, tuple)):
        return [coerce_int(item) for item in value]
    raise FieldError("list_type", "Input should be a valid list")


def optional(check: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def run(value: Any) -> Any:
        return None if value is None else check(value)

    return run


def passthrough(value: Any) -> Any:
    return value


# ----------------------------------------------------------------------------------------------
# Model base
# ----------------------------------------------------------------------------------------------

class Field:
    """Declaration of one model field: default factory, validator, JSON encoder."""

    __slots__ = ("name", "default_factory", "validate", "to_json")

    def __init__(
        self,
        name: str,
        default_factory: Callable[[], Any],
        validate: Callable[[Any], Any] = passthrough,
        to_json: Callable[[Any], Any] | None = None,
    ) -> None:
        self.name = name
        self.default_factory = default_factory
        self.validate = validate
        self.to_json = to_json

    @property
    def default(self) -> Any:
        return self.default_factory()


def to_jsonable(value: Any) -> Any:
    """Convert a dumped value to plain JSON types (enums to values, models to dicts, arrays to lists)."""
    if isinstance(value, Model):
        return value.model_dump(mode="json")
    if isinstance(value, dict):
        return {str(k) if not isinstance(k, str) else k: to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    enum_value = getattr(value, "_value_", None)
    if enum_value is not None and hasattr(type(value), "__members__"):
        return to_jsonable(enum_value)
    if hasattr(value, "tolist"):
        return value.tolist()
    return value


class Model:
    """Base class with the pydantic-like model API (fields listed in ``_engine_fields``)."""

    __slots__ = ("__dict__", "_engine_fields_set")
    _engine_fields: tuple[Field, ...] = ()

    def __init__(self, **data: Any) -> None:
        errors: list[dict[str, Any]] = []
        values = self.__dict__
        given = set()
        for field in self._engine_fields:
            name = field.name
            if name in data:
                raw = data[name]
                given.add(name)
                try:
                    values[name] = field.validate(raw)
                except FieldError as err:
                    errors.append({"type": err.kind, "loc": (name,), "msg": err.msg, "input": raw})
                except ValidationError as err:
                    for inner in err.errors():
                        inner["loc"] = (name,) + tuple(inner["loc"])
                        errors.append(inner)
            else:
                values[name] = field.default_factory()
        if errors:
            raise ValidationError(type(self).__name__, errors)
        self._engine_fields_set = given

    # -- pydantic-compatible API ---------------------------------------------------------------
    @classmethod
    def _engine_field_names(cls) -> tuple[str, ...]:
        return tuple(field.name for field in cls._engine_fields)

    @property
    def model_fields_set(self) -> set[str]:
        return set(getattr(self, "_engine_fields_set", ()))

    @classmethod
    def model_construct(cls, _fields_set: set[str] | None = None, **values: Any) -> Model:
        obj = cls.__new__(cls)
        for field in cls._engine_fields:
            obj.__dict__[field.name] = values[field.name] if field.name in values else field.default_factory()
        obj._engine_fields_set = set(values) if _fields_set is None else set(_fields_set)
        return obj

    @classmethod
    def model_validate(cls, obj: Any, **_: Any) -> Model:
        if isinstance(obj, cls):
            return obj
        if isinstance(obj, Model):
            obj = obj.model_dump()
        if not isinstance(obj, dict):
            raise ValidationError(
                cls.__name__,
                [{"type": "model_type", "loc": (), "msg": f"Input should be a valid dictionary or instance of {cls.__name__}", "input": obj}],
            )
        return cls(**obj)

    @classmethod
    def model_validate_json(cls, json_data: str | bytes | bytearray, **_: Any) -> Model:
        try:
            obj = json.loads(json_data)
        except ValueError as err:
            raise ValidationError(cls.__name__, [{"type": "json_invalid", "loc": (), "msg": f"Invalid JSON: {err}", "input": json_data}]) from None
        return cls.model_validate(obj)

    def _engine_dump_fields(self) -> list[tuple[str, Any]]:
        return [(field.name, self.__dict__.get(field.name)) for field in self._engine_fields]

    def model_dump(
        self,
        *,
        mode: str = "python",
        include: Any = None,
        exclude: Any = None,
        exclude_none: bool = False,
        exclude_defaults: bool = False,
        exclude_unset: bool = False,
        **_: Any,
    ) -> dict[str, Any]:
        out: dict[str, Any] = {}
        fields_set = getattr(self, "_engine_fields_set", ())
        defaults = {field.name: field for field in self._engine_fields}
        for name, value in self._engine_dump_fields():
            if include is not None and name not in include:
                continue
            if exclude is not None and name in exclude:
                continue
            if exclude_none and value is None:
                continue
            if exclude_unset and name not in fields_set:
                continue
            if exclude_defaults and name in defaults and _safe_equal(value, defaults[name].default_factory()):
                continue
            if isinstance(value, Model):
                value = value.model_dump(mode=mode, exclude_none=exclude_none)
            elif mode == "json":
                value = to_jsonable(value)
            else:
                value = copy.copy(value) if isinstance(value, (dict, list)) else value
            out[name] = value
        return out

    def model_dump_json(self, *, indent: int | None = None, **kwargs: Any) -> str:
        data = self.model_dump(mode="json", **kwargs)
        if indent is None:
            return json.dumps(data, ensure_ascii=False, separators=(",", ":"))
        return json.dumps(data, ensure_ascii=False, indent=indent)

    def model_copy(self, *, update: dict[str, Any] | None = None, deep: bool = False) -> Model:
        obj = copy.deepcopy(self) if deep else copy.copy(self)
        if update:
            obj.__dict__.update(update)
        return obj

    def __copy__(self) -> Model:
        obj = type(self).__new__(type(self))
        obj.__dict__.update(self.__dict__)
        obj._engine_fields_set = set(getattr(self, "_engine_fields_set", ()))
        return obj

    def __deepcopy__(self, memo: dict[int, Any]) -> Model:
        return _copy_model(self, memo)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__deepcopy__ is Model.__deepcopy__:
            register_copier(cls, _copy_model)  # engine._copying calls it without the method lookup

    def __eq__(self, other: object) -> bool:
        if type(self) is not type(other):
            return NotImplemented
        return all(_safe_equal(a, b) for (_, a), (_, b) in zip(self._engine_dump_fields(), other._engine_dump_fields(), strict=True))  # type: ignore[attr-defined]

    __hash__ = None  # type: ignore[assignment]  # models are mutable, like pydantic's

    def __iter__(self):  # pydantic models iterate over (name, value) pairs
        return iter(self._engine_dump_fields())

    def __repr_args__(self) -> str:
        return ", ".join(f"{name}={value!r}" for name, value in self._engine_dump_fields())

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.__repr_args__()})"

    def __str__(self) -> str:
        return " ".join(f"{name}={value!r}" for name, value in self._engine_dump_fields())

    def __getstate__(self) -> dict[str, Any]:
        return {"dict": dict(self.__dict__), "fields_set": set(getattr(self, "_engine_fields_set", ()))}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state["dict"])
        self._engine_fields_set = state["fields_set"]


def _copy_model(model: Model, memo: dict[int, Any]) -> Model:
    """``copy.deepcopy(model, memo)``, entering the copy in ``memo`` (``Model.__deepcopy__``)."""
    cls = type(model)
    obj = cls.__new__(cls)
    memo[id(model)] = obj
    obj.__dict__.update(copy_state(model.__dict__, memo))
    obj._engine_fields_set = set(getattr(model, "_engine_fields_set", ()))
    keep_alive(model, memo)
    return obj


def _safe_equal(a: Any, b: Any) -> bool:
    if a is b:
        return True
    result = a == b
    if isinstance(result, bool):
        return result
    try:
        return bool(getattr(result, "all", lambda: result)())
    except (TypeError, ValueError):
        return False
