"""One module per feature; each has ``register(server)`` adding its handlers."""
