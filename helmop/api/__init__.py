"""Custom resource models: parsing and validating specs, building statuses. Pure: no I/O."""
