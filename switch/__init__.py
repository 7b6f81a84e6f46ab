"""netsum: switch."""
