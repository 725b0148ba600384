"""REST server for atomistic models (FastAPI); built on :mod:`atomistic`."""
