"""HTTP delivery engine: everything between "this execution is due" and "here is its outcome".

Free of Django on purpose, so the Celery task is thin glue and each piece is tested alone:

- ``request``   what to send: the spec, header rules, the prepared request per attempt,
                each redirect hop's request
- ``template``  body templates (``{{ job.name }}``), escaped per body format
- ``signing``   Standard Webhooks signatures
- ``guard``     which addresses may be reached (SSRF), enforced at socket-open time
- ``aio``       the engine: sending one delivery (on an event loop, or from blocking code)
                and reporting what happened, never raising
- ``deadlines`` the total deadlines of a loop's deliveries, one timer a tick
- ``cancellation`` a cancel asked for from another thread
- ``transport`` guarded urllib3 connections for blocking HTTP outside deliveries (OIDC)
- ``outcome``   what a delivery brought back, success criteria, the classification of a result
- ``saferegex`` customer regexes searched in linear time
- ``retry``     whether and when to try again
- ``breaker``   per-host circuit breaker shared through Redis
- ``limits``    per-organization concurrency semaphore and token bucket in Redis
- ``errors``    ``InvalidRequest(code, field, message)`` for clear 4xx responses
"""
