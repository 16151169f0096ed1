"""The API platform: what every app's endpoints share (authentication, actors and roles,
errors, pagination, throttling, parsers, filters, the schema hooks, the fast representation,
idempotency) and the pages' access decorators. Apps' own endpoints live in their apps."""
