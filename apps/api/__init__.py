"""The API platform: what every app's endpoints share (authentication and its key cache,
actors and roles, errors, pagination, throttling, parsers, filters, the schema hooks, the
fast representation, idempotency, the request-limit and CSP middleware) and the pages'
access decorators. Apps' own endpoints live in their apps, except accounts': they stand on
this platform, which stands on accounts, so they are in apps/api/accounts/."""
