"""Typed tools for the JSON tool loop: an allowlist of Python callables.

A tool is a plain function with annotated parameters; its arguments are validated by a pydantic
model built from the signature before it runs. Model output is never evaluated: the only code
that runs is a registered function, called with validated keyword arguments.
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Annotated, Any, get_type_hints

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, create_model

from fleetmind.errors import ConfigError
from fleetmind.llm.parse import summarize_validation


def _build_args_model(name: str, fields: tuple[tuple[str, Any], ...]) -> type[BaseModel]:
    return create_model(f"{name}_args", __config__=ConfigDict(extra="forbid"), **dict(fields))


def _build_narrowed(
    name: str, base: type[BaseModel], allowed: tuple[tuple[str, tuple[Any, ...]], ...]
) -> type[BaseModel]:
    limits = dict(allowed)
    fields: dict[str, Any] = {}
    for arg, info in base.model_fields.items():
        ann: Any = info.annotation
        if arg in limits:
            values = list(limits[arg])
            ann = Annotated[
                ann, Field(json_schema_extra={"enum": values}), AfterValidator(_one_of(values))
            ]
        fields[arg] = (ann, ... if info.is_required() else info.default)
    return create_model(f"{name}_args", __config__=ConfigDict(extra="forbid"), **fields)


# Building a pydantic model takes about a millisecond of Python: a caller that makes the same
# tools for every task (the incident desk: ten tools and a narrowed schema each turn) would spend
# it again and again, on a thread that shares the interpreter with the control loop.
_args_model = functools.lru_cache(maxsize=512)(_build_args_model)
_narrowed_model = functools.lru_cache(maxsize=512)(_build_narrowed)


@dataclass(frozen=True)
class Tool:
    """A registered tool.

    Attributes:
        name: the name the model calls it by.
        description: one line shown to the model.
        fn: the function to run.
        args_model: the pydantic model validating the arguments.
    """

    name: str
    description: str
    fn: Callable[..., Any]
    args_model: type[BaseModel]

    @classmethod
    def from_function(
        cls,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
    ) -> Tool:
        """Build a tool from an annotated function.

        Args:
            fn: the function; every parameter needs a type annotation.
            name: the tool name (default: the function name).
            description: one line for the model (default: the docstring's first line).

        Returns:
            The tool.

        Raises:
            ConfigError: a parameter has no annotation or is positional-only/variadic.
        """
        tool_name = name or fn.__name__
        hints = get_type_hints(fn)
        fields: dict[str, Any] = {}
        for param in inspect.signature(fn).parameters.values():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
                raise ConfigError(f"tool {tool_name!r}: parameter {param.name!r} must be named")
            if param.name not in hints:
                raise ConfigError(f"tool {tool_name!r}: parameter {param.name!r} has no type")
            default = ... if param.default is param.empty else param.default
            fields[param.name] = (hints[param.name], default)
        try:
            args_model = _args_model(tool_name, tuple(fields.items()))
        except TypeError:  # an unhashable default: built afresh
            args_model = _build_args_model(tool_name, tuple(fields.items()))
        doc = description or (inspect.getdoc(fn) or "").split("\n", 1)[0]
        return cls(tool_name, doc, fn, args_model)

    def narrowed(self, allowed: Mapping[str, Sequence[str | int]]) -> Tool:
        """The same tool with some parameters limited to given values.

        The values go into the argument schema as an ``enum`` (so constrained decoding cannot
        produce another) and are checked on validation (so an unconstrained backend is told).

        Args:
            allowed: parameter name to the values it may take.

        Returns:
            A new tool; this one is unchanged.
        """
        key = tuple(sorted((k, tuple(dict.fromkeys(v))) for k, v in allowed.items()))
        try:
            model = _narrowed_model(self.name, self.args_model, key)
        except TypeError:  # an unhashable value or default: built afresh
            model = _build_narrowed(self.name, self.args_model, key)
        return replace(self, args_model=model)

    def signature(self) -> str:
        """A one-line description such as ``add(a: integer, b: integer) - Add two numbers``."""
        props = self.args_model.model_json_schema().get("properties", {})
        required = set(self.args_model.model_json_schema().get("required", []))
        args = []
        for arg, spec in props.items():
            kind = spec.get("type") or "any"
            args.append(f"{arg}: {kind}" + ("" if arg in required else "?"))
        text = f"{self.name}({', '.join(args)})"
        return f"{text} - {self.description}" if self.description else text

    def validate(self, args: dict[str, Any]) -> BaseModel:
        """Validate arguments.

        Args:
            args: the model's arguments.

        Returns:
            The validated arguments.

        Raises:
            ValidationError: the arguments do not fit the signature.
        """
        return self.args_model.model_validate(args)

    def run(self, validated: BaseModel) -> Any:
        """Call the function with validated arguments."""
        return self.fn(**{k: getattr(validated, k) for k in type(validated).model_fields})


def _one_of(values: Sequence[str | int]) -> Callable[[Any], Any]:
    def check(v: Any) -> Any:
        if v not in values:
            raise ValueError(f"must be one of {', '.join(map(str, values))}")
        return v

    return check


class ToolRegistry:
    """The allowlist of tools a loop may run.

    Args:
        tools: tools or annotated functions.

    Raises:
        ConfigError: two tools share a name.
    """

    def __init__(self, tools: Iterable[Tool | Callable[..., Any]] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for t in tools:
            self.add(t)

    def add(self, tool: Tool | Callable[..., Any]) -> Tool:
        """Register a tool or an annotated function; returns the tool."""
        t = tool if isinstance(tool, Tool) else Tool.from_function(tool)
        if t.name in self._tools:
            raise ConfigError(f"tool {t.name!r} is registered twice")
        self._tools[t.name] = t
        return t

    def get(self, name: str) -> Tool | None:
        """The tool of that name, or None."""
        return self._tools.get(name)

    @property
    def names(self) -> list[str]:
        """Tool names in registration order."""
        return list(self._tools)

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def args_schema(self, name: str) -> dict[str, Any]:
        """The JSON schema of a tool's arguments."""
        return self._tools[name].args_model.model_json_schema()

    def describe(self, exclude: Iterable[str] = ()) -> str:
        """One line per tool, skipping ``exclude``."""
        skip = set(exclude)
        return "\n".join(f"- {t.signature()}" for t in self if t.name not in skip)


def normalise_args(value: Any) -> Any:
    """Normalise tool arguments for loop detection.

    Strings are stripped, lower-cased and whitespace-collapsed; numbers become floats rounded to
    6 significant digits (so ``1`` and ``1.0000001`` match); dict keys are sorted by the JSON dump.

    Args:
        value: a JSON-like value.

    Returns:
        The normalised value.
    """
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        return float(f"{float(value):.6g}")
    if isinstance(value, str):
        return " ".join(value.split()).lower()
    if isinstance(value, dict):
        return {str(k).strip().lower(): normalise_args(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [normalise_args(v) for v in value]
    return repr(value)


def call_key(tool: str, args: dict[str, Any]) -> str:
    """The loop-detection key of a call: tool name plus normalised arguments."""
    return tool + ":" + json.dumps(normalise_args(args), sort_keys=True, default=repr)


def validation_summary(exc: ValidationError) -> str:
    """Summarise an argument validation error, with ``args.`` prefixed to field names."""
    return summarize_validation(exc).replace("field '", "field 'args.")
