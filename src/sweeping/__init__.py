"""The parts of src/sweep.py, one job each: spec, plan, backends (the archive is sweep_archive.py)."""
