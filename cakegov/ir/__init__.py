"""Schedule language front end and typed IR."""
