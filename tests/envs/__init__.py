"""Test-only environments and engines (not registered, not shipped)."""
