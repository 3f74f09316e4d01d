"""One error hierarchy with stable machine codes.

    SCDBError (500 internal)
    ├── AuthError (401 unauthorized)
    ├── ForbiddenError (403 forbidden)
    │   ├── ScopeForbiddenError (403 forbidden_scope)
    │   ├── PrivilegeEscalationError (403 privilege_escalation)
    │   ├── SelfLockoutError (403 self_lockout)
    │   └── GroupForbiddenError (403 forbidden_group: adding an ACL group one is not in)
    ├── PaymentError (402)
    │   ├── UpgradeRequiredError (402 upgrade_required, required_tier)
    │   └── QuotaExceededError (402 quota_exceeded, limit/used/requested)
    ├── NotFoundError (404 not_found)
    ├── ConflictError (409 conflict)
    │   ├── LastAdminError (409 last_admin)
    │   └── ObjectInUseError (409 object_in_use, doc_ids: the caller-readable referrers)
    ├── RequestTimeoutError (408 request_timeout: a body that arrives too slowly)
    ├── PayloadTooLargeError (413 payload_too_large)
    ├── ValidationError (422 validation_error)
    ├── RateLimitedError (429 rate_limited)
    ├── UnavailableError (503 unavailable)
    │   └── OverloadedError (503 overloaded, retry_after: admission control)
    └── InsufficientStorageError (507 insufficient_storage)

The API renders every one of them as ``{"error": {"code", "message", ...extra}}``.
"""

from __future__ import annotations

from typing import Any


class SCDBError(Exception):
    code = "internal"
    http_status = 500

    def __init__(self, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.message = message
        self.extra = extra

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, **self.extra}


class AuthError(SCDBError):
    code = "unauthorized"
    http_status = 401


class ForbiddenError(SCDBError):
    code = "forbidden"
    http_status = 403


class ScopeForbiddenError(ForbiddenError):
    code = "forbidden_scope"


class PrivilegeEscalationError(ForbiddenError):
    """A tenant admin acting on, or granting, more power than it holds itself."""

    code = "privilege_escalation"


class SelfLockoutError(ForbiddenError):
    code = "self_lockout"


class GroupForbiddenError(ForbiddenError):
    code = "forbidden_group"


class PaymentError(SCDBError):
    code = "payment_required"
    http_status = 402


class UpgradeRequiredError(PaymentError):
    code = "upgrade_required"


class QuotaExceededError(PaymentError):
    code = "quota_exceeded"


class NotFoundError(SCDBError):
    code = "not_found"
    http_status = 404


class ConflictError(SCDBError):
    code = "conflict"
    http_status = 409


class LastAdminError(ConflictError):
    """The change would leave a tenant without an enabled admin."""

    code = "last_admin"


class ObjectInUseError(ConflictError):
    code = "object_in_use"


class ClusterSpanError(ConflictError):
    """A principal's scopes would name tenants held by different clusters (D-277)."""

    code = "cluster_span"


class RequestTimeoutError(SCDBError):
    code = "request_timeout"
    http_status = 408


class PayloadTooLargeError(SCDBError):
    code = "payload_too_large"
    http_status = 413


class ValidationError(SCDBError):
    code = "validation_error"
    http_status = 422


class RateLimitedError(SCDBError):
    code = "rate_limited"
    http_status = 429


class UnavailableError(SCDBError):
    code = "unavailable"
    http_status = 503


class InsufficientStorageError(SCDBError):
    code = "insufficient_storage"
    http_status = 507


class OverloadedError(UnavailableError):
    """Admission control refused the request (bounded in-flight slots and queue are full)."""

    code = "overloaded"
