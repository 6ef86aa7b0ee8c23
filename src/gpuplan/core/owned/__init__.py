"""The server the team already has (`plan --have`, `check`): what to try on it (tries), how it runs the job (ways),
what to add, rent or buy for the rest (options), the answer (assess)."""
