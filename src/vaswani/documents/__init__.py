"""Documents, not lines: texts of several sentences split into the segments a model translates
and joined back with their own whitespace (`segment.py`)."""
