"""What differs between the Python versions supported."""

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from typing_extensions import TypeVar
elif sys.version_info >= (3, 13):
    from typing import TypeVar
else:
    import typing

    def TypeVar(name: str, *constraints: Any, default: Any = None, **options: Any) -> Any:
        # A type parameter's default (PEP 696) only guides type checkers: before
        # 3.13 it is dropped at run time rather than importing typing_extensions.
        return typing.TypeVar(name, *constraints, **options)


__all__ = ["TypeVar"]
