"""The accounts' own endpoints: API keys, members, audit events, data exports and the
organization's deletion. They sit on the API platform (the rest of apps.api), which sits
on apps.accounts, so they live here rather than in apps.accounts."""
