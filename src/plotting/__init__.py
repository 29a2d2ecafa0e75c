"""The parts of src/plot.py, one job each: grouping, aggregates, reference bands, export."""
