"""netsum: controller."""
