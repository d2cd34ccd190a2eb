"""Test doubles shared by test packages (only for what cannot run on a test machine)."""
