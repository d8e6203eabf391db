"""cloudpickle serialization of a call (function, args, kwargs) with errors that name what could
not be serialized — by value for functions defined in __main__ or a notebook cell (cloudpickle's
rule), by reference for functions of importable modules.
Thread safety: pure functions."""
import cloudpickle

from ._errors import SerializationError


def _describe(value) -> str:
    return f"a {type(value).__module__}.{type(value).__qualname__}"


def dumps_call(fn, args: tuple, kwargs: dict) -> bytes:
    """The payload every rank loads; SerializationError naming the culprit before anything
    runs."""
    try:
        return cloudpickle.dumps((fn, args, kwargs))
    except Exception as whole:  # noqa: BLE001 - find which part, then report it
        parts = [(f"the function {getattr(fn, '__qualname__', fn)!r}", fn)]
        parts += [(f"argument {i} ({_describe(a)})", a) for i, a in enumerate(args)]
        parts += [(f"keyword argument {k!r} ({_describe(v)})", v) for k, v in kwargs.items()]
        for what, value in parts:
            try:
                cloudpickle.dumps(value)
            except Exception as exc:  # noqa: BLE001
                raise SerializationError(
                    f"{what} cannot be serialized with cloudpickle: {type(exc).__name__}: "
                    f"{exc}; nothing was started") from exc
        raise SerializationError(f"the call cannot be serialized with cloudpickle: "
                                 f"{type(whole).__name__}: {whole}; nothing was started") from whole
