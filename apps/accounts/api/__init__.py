"""The REST API's shared machinery: who is calling (authentication, actor, roles), the
error format, throttling, pagination, idempotency, audit, and the account endpoints
(API keys, members, audit events). The jobs, projects and executions apps build their
viewsets on it."""
