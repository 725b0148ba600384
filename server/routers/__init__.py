"""Thin routers: validate, call the library or the batcher, shape the response."""
