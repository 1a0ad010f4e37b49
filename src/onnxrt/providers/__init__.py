"""Built-in execution providers."""
