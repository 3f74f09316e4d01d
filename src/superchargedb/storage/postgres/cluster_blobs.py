"""Each cluster's objects in its own blob store (D-279).

Blobs are content-addressed and collected once no row names them. With one store shared by
several clusters, a cluster's collector would count only its own rows and could remove bytes
another cluster's object still names; so each cluster has its own folder (or bucket prefix),
and the parts that hold a blob store hold this one, which resolves the request's cluster per
call like the router's other parts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from ..sqlite.objects import FileBlobStore, Staged


class RoutedBlobs(FileBlobStore):
    """A ``FileBlobStore`` whose every call goes to ``pick()``'s store."""

    def __init__(self, root: Path, pick: Callable[[], FileBlobStore]) -> None:
        # No folder of its own: ``root`` (the clusters' parent folder) is only reported.
        self.root = root
        self._pick = pick

    def path(self, sha256: str) -> Path:
        return self._pick().path(sha256)

    def exists(self, sha256: str) -> bool:
        return self._pick().exists(sha256)

    def put(self, chunks: Iterable[bytes], max_bytes: int) -> tuple[str, int]:
        return self._pick().put(chunks, max_bytes)

    def stage(self, chunks: Iterable[bytes], max_bytes: int | None) -> Staged:
        return self._pick().stage(chunks, max_bytes)

    def commit(self, staged: Staged) -> None:
        self._pick().commit(staged)

    def discard(self, staged: Staged) -> None:
        self._pick().discard(staged)

    def remove(self, sha256: str) -> bool:
        return self._pick().remove(sha256)
