"""SuperChargeDB: a self-hostable multimodal retrieval database with cited answers.

onnxruntime is imported first on purpose: importing usearch's native module before
onnxruntime's segfaults the interpreter on this platform (see docs/decisions.md, D-101).
"""

import onnxruntime as _ort  # noqa: F401  (import order matters, see above)

from ._version import __version__  # noqa: E402
from .client import APIError, AsyncClient, Client  # noqa: E402  (after onnxruntime, see above)

__all__ = ["APIError", "AsyncClient", "Client", "__version__"]
