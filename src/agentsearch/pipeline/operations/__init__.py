"""Operating the service over its life: what is kept and for how long, rebuilt, backed up and restored."""
