"""The ``embedded_server`` fixture (one real SmolLM2 server per session) lives in tests/conftest.py.

It is not redefined here: a second definition would start a second server in sessions that run
other tiers' tests too.
"""
