"""One exception hierarchy for the gateway; ``api/`` turns it into the OpenAI error body.

    VentanaError                      (500, server_error)
    ├── ConfigError                   a config file that cannot be used; raised before serving
    ├── RequestError                  (400, invalid_request_error) the client sent something wrong
    │   ├── BodyTooLarge              (413)
    │   ├── UnknownModel              (404, model_not_found)
    │   ├── NotFound                  (404, not_found) an id the caller has no object under
    │   ├── ContextTooLong            (400, context_length_exceeded)
    │   ├── LintViolation             (400) strict lint rejected the assembled context
    │   └── UnsupportedMediaType      (415) a POST whose body is not declared JSON (a CSRF form post)
    ├── AuthError                     (401, invalid_api_key)
    │   └── PermissionDenied          (403) a valid key that may not use an admin surface, a cross-site browser
    ├── RateLimited                   (429, rate_limit_exceeded) the gateway's own per-key limit
    ├── GatewayBusy                   (503, gateway_busy) no upstream connection came free in time
    ├── StoreError                    the context store cannot be used
    │   └── StoreNotMigrated          the database is not at the schema this gateway writes; raised before serving
    └── UpstreamError                 the provider failed; status mirrors it faithfully
        ├── UpstreamRateLimited       (429, retry-after kept)
        ├── UpstreamTimeout           (504)
        ├── UpstreamUnavailable       (502) refused/closed connection, 5xx, malformed answer
        └── UpstreamRejected          (4xx the provider returned, passed through)

Foreign exceptions (httpx, litellm) are converted at the boundary that meets them,
most specific first, with ``raise ... from exc``.
"""

from __future__ import annotations

from typing import Any


class VentanaError(Exception):
    status_code: int = 500
    error_type: str = "server_error"
    code: str | None = None

    def __init__(
        self,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        if code is not None:
            self.code = code
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.error_type, "param": self.param, "code": self.code}}


class ConfigError(VentanaError):
    pass


class RequestError(VentanaError):
    status_code = 400
    error_type = "invalid_request_error"


class BodyTooLarge(RequestError):
    status_code = 413
    code = "request_too_large"


class UnknownModel(RequestError):
    status_code = 404
    code = "model_not_found"


class NotFound(RequestError):
    status_code = 404
    code = "not_found"


class ContextTooLong(RequestError):
    code = "context_length_exceeded"


class LintViolation(RequestError):
    code = "context_lint_failed"


class UnsupportedMediaType(RequestError):
    status_code = 415
    code = "unsupported_media_type"


class AuthError(VentanaError):
    status_code = 401
    error_type = "authentication_error"
    code = "invalid_api_key"


class PermissionDenied(AuthError):
    status_code = 403
    error_type = "permission_error"
    code = "admin_key_required"


class RateLimited(VentanaError):
    status_code = 429
    error_type = "rate_limit_error"
    code = "rate_limit_exceeded"


class GatewayBusy(VentanaError):
    status_code = 503
    code = "gateway_busy"


class StoreError(VentanaError):
    pass


class StoreNotMigrated(StoreError):
    pass


class UpstreamError(VentanaError):
    status_code = 502
    error_type = "upstream_error"
    code = "upstream_error"
    #: Each attempt the upstream made before giving up, oldest first ("500: <body excerpt>"): the
    #: request's record shows them, so an error page says what the provider answered each time.
    attempts: tuple[str, ...] = ()


class UpstreamRateLimited(UpstreamError):
    status_code = 429
    error_type = "rate_limit_error"
    code = "rate_limit_exceeded"


class UpstreamTimeout(UpstreamError):
    status_code = 504
    error_type = "timeout_error"
    code = "upstream_timeout"


class UpstreamUnavailable(UpstreamError):
    status_code = 502
    code = "upstream_unavailable"


class UpstreamRejected(UpstreamError):
    """A 4xx from the provider: the request itself was wrong, so the client sees the same status."""

    error_type = "invalid_request_error"

    def __init__(self, message: str, *, status_code: int, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.status_code = status_code
