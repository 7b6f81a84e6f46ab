"""netsum: workers."""
