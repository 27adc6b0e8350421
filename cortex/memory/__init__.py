"""Memory built on the store: agent memory in Org files and identity-scoped conversation memory."""
