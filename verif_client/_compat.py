"""What differs between the Python versions supported."""

import sys

if sys.version_info >= (3, 13):
    from typing import TypeVar
else:  # PEP 696 defaults for type parameters
    from typing_extensions import TypeVar

__all__ = ["TypeVar"]
