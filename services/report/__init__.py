"""Reports over the common Experiment model (any backend): one self-contained HTML page, or the
same content as JSON. `build` makes the data, `html` renders it, `output` names and writes files."""
