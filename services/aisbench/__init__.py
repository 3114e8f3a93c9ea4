"""AISBench (`ais_bench`, PyPI ais-bench-benchmark) tasks on eval hosts reached over SSH."""
