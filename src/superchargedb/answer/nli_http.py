"""A real NLI model behind HTTP as the support checker (``SCDB_SUPPORT_CHECKER=http:<url>``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from superchargedb.errors import UnavailableError, ValidationError

from .claims import strip_markers
from .support import Support

__all__ = ["HttpNliChecker"]


class HttpNliChecker:
    """A real NLI model behind HTTP: ``POST url {"premise", "hypothesis"}`` answers
    ``{"entailment": p}``. Supported when ``p >= threshold``. When the cited premise fails and
    ``others`` are given, up to ``max_others`` of them are asked too, to name a better one."""

    def __init__(
        self,
        url: str,
        *,
        threshold: float = 0.5,
        timeout: float = 10.0,
        max_others: int = 3,
        client: Any | None = None,
    ) -> None:
        import httpx

        if not url.startswith(("http://", "https://")):
            raise ValidationError(f"NLI url must be http(s): {url!r}")
        self.url = url
        self.threshold = threshold
        self.max_others = max_others
        self._client = client or httpx.Client(timeout=timeout)

    def _entailment(self, premise: str, hypothesis: str) -> float:
        import httpx

        try:
            r = self._client.post(self.url, json={"premise": premise, "hypothesis": hypothesis})
            r.raise_for_status()
            p = float(r.json()["entailment"])
        except (httpx.HTTPError, KeyError, TypeError, ValueError) as e:
            raise UnavailableError(f"NLI service failed: {e}") from e
        if not 0.0 <= p <= 1.0:
            raise UnavailableError(f"NLI service returned entailment {p} outside [0, 1]")
        return p

    def check(self, sentence: str, cited: Sequence[str], others: Sequence[str] = ()) -> Support:
        hypothesis = strip_markers(sentence)
        if not hypothesis or not cited:
            return Support(
                False, 0.0, ("empty sentence" if not hypothesis else "no cited passage",)
            )
        p = self._entailment("\n\n".join(cited), hypothesis)
        if p >= self.threshold:
            return Support(True, round(p, 4))
        reasons = [f"entailment {p:.2f} below {self.threshold:.2f}"]
        for k, other in enumerate(others[: self.max_others]):
            po = self._entailment(other, hypothesis)
            if po >= self.threshold:
                reasons.append(f"better supported by others[{k}] ({po:.2f})")
                break
        return Support(False, round(p, 4), tuple(reasons))

    def close(self) -> None:
        self._client.close()
