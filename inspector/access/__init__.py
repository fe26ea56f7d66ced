"""Who may change the line, and the record of who did: the room between the results database and every way in.

- roles.py      the roles (operator, engineer, admin, and the box's own service token) and what each may do
- passwords.py  argon2 password hashes
- users.py      users and their API tokens in the results database (`inspector user ...`)
- identity.py   who a request comes from, and the two refusals (401: not known, 403: not allowed)
- gate.py       a bearer token to an Identity, for the kiosk's API and the model server
- audit.py      the append-only, hash-chained trail of every change (`inspector audit ...`)
- tls.py        server contexts from a certificate and key; clients that check a CA file or a pinned fingerprint

Nothing here imports the engine, the line or Qt: the kiosk, the dashboard and the CLI all stand on it.
"""
