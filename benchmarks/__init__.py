"""Benchmarks of verif_client beside zeep and a bare httpx+lxml floor: ``nox -s bench``."""
