"""Lock names of the frameworks' lock decorators: ``str.format`` templates over parameters.

Django's ``@zk_lock("invoice-{pk}")`` and Flask's ``@zk.locked("invoice-{id}")``
name their locks with one. ``"invoice-{pk}"`` on ``def view(request, pk)``:
the fields are checked against the signature when decorating (unless the
function takes ``**kwargs``) and filled from each call's arguments. Each value is
percent-quoted into one node name segment (``quote(str(value), safe="")``), so
a "/" from a URL never reaches out of the lock directory, and a value of dots
alone is quoted too ("." and ".." are not node names).
"""

from __future__ import annotations

import functools
import inspect
import re
import string
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import quote

from zk_recipes import ConfigurationError

_FIELD_ROOT = re.compile(r"[.\[]")  # "{obj.id}" and "{ids[0]}" start with a parameter


class LockNameTemplate:
    """A lock name template over a function's parameters, checked once.

    ``LockNameTemplate("invoice-{pk}", view).render(args, kwargs)`` gives
    ``"invoice-7"`` for ``view(request, pk=7)``. ``where`` names the function
    in errors (default: its dotted path, also in ``.where``).
    """

    def __init__(self, text: str, func: Callable[..., Any], where: str | None = None) -> None:
        if where is None:
            where = qualified_name(func)
        self.text = text
        self.where = where
        self.fields = _fields(text, where)
        self._signature: inspect.Signature | None = None
        if not self.fields:
            return
        # Django's method_decorator hands over partial(bound method) made to look like the
        # function, self included; calls bind to the partial's own signature.
        follow = not isinstance(func, functools.partial)
        signature = inspect.signature(func, follow_wrapped=follow)
        self._signature = signature
        unknown = unknown_parameters(signature, self.fields)
        if unknown:
            raise ConfigurationError(
                f"lock name {text!r} of {where} uses {{{unknown[0]}}}, which is not one of its "
                f"parameters ({', '.join(signature.parameters) or 'none'})"
            )

    def render(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str:
        """The name for one call: the values of ``args``/``kwargs``, each quoted."""
        if self._signature is None:
            return self.text
        values = bind_arguments(self._signature, args, kwargs)
        try:
            return _QUOTING.vformat(self.text, (), values)
        except (KeyError, AttributeError, IndexError, TypeError) as exc:
            raise ConfigurationError(
                f"lock name {self.text!r} of {self.where}: cannot fill it from this call's "
                f"arguments ({', '.join(values) or 'none'}): {exc!r}"
            ) from None

    def __repr__(self) -> str:
        return f"<LockNameTemplate {self.text!r} of {self.where}>"


def bind_arguments(
    signature: inspect.Signature, args: Sequence[Any], kwargs: Mapping[str, Any]
) -> dict[str, Any]:
    """One call's arguments by parameter name: defaults applied, ``**kwargs`` flattened.

    So ``f(1)``, ``f(x=1)`` and ``f(1, y=<the default>)`` give one mapping,
    which is what makes two calls meaning the same name the same lock (a
    lock name template, a Celery singleton key). Names caught by ``**kwargs``
    appear under their own names, and only when the call passed them. A call
    that does not fit the signature raises ``TypeError``, as calling would.
    """
    bound = signature.bind(*args, **kwargs)
    bound.apply_defaults()
    arguments = dict(bound.arguments)
    for param in signature.parameters.values():
        if param.kind is param.VAR_KEYWORD:
            arguments.update(arguments.pop(param.name, {}))
    return arguments


def unknown_parameters(signature: inspect.Signature, names: Iterable[str]) -> list[str]:
    """The ``names`` no call of ``signature`` could supply: none when it takes ``**kwargs``.

    For checking a lock name template or a singleton key once, when the
    function is decorated, rather than at each call.
    """
    params = signature.parameters
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return []
    return [name for name in names if name not in params]


def qualified_name(func: Callable[..., Any]) -> str:
    """``module.qualname`` of a function: the default identifier of its lock."""
    module = getattr(func, "__module__", None) or "?"
    qualname = getattr(func, "__qualname__", None) or getattr(func, "__name__", repr(func))
    return f"{module}.{qualname}"


def _fields(text: str, where: str) -> list[str]:
    """The parameter names a template's fields start with (nested ones too)."""
    try:
        parsed = list(string.Formatter().parse(text))
    except ValueError as exc:
        raise ConfigurationError(
            f"lock name {text!r} of {where} is not a str.format template: {exc}"
        ) from None
    found: list[str] = []
    for _literal, field, spec, _conversion in parsed:
        if field is None:
            continue
        root = _FIELD_ROOT.split(field, maxsplit=1)[0]
        if not root or root.isdigit():
            raise ConfigurationError(
                f"lock name {text!r} of {where}: name a parameter in each field, like "
                f"{{pk}}, not {{{field}}}"
            )
        found.append(root)
        if spec:
            found.extend(_fields(spec, where))
    return found


class _QuotingFormatter(string.Formatter):
    """Formats each value into one znode name segment: no "/", never "." or ".."."""

    def format_field(self, value: Any, format_spec: str) -> str:
        text = quote(format(value, format_spec), safe="")
        return text.replace(".", "%2E") if text and not text.strip(".") else text


_QUOTING = _QuotingFormatter()
