#!/bin/sh
# Your first job, with no id to look up: with no project named, it goes to your only one.
# After `make run`: export CRONSVC_URL=http://127.0.0.1:8000 CRONSVC_API_KEY=<the Demo API key it printed>
curl -sS --fail-with-body -X POST "$CRONSVC_URL/api/v1/jobs/" \
  -H "Authorization: Bearer $CRONSVC_API_KEY" \
  -H "Content-Type: application/json" \
  -d '{"name": "nightly report",
       "schedule": {"type": "cron", "expression": "0 3 * * *", "timezone": "Europe/Berlin"},
       "request": {"url": "https://example.com/hook", "method": "POST"}}'
