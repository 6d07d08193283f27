"""Several Tusk processes on one PostgreSQL database (docs: Scaling out)."""
