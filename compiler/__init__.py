"""netsum: compiler."""
