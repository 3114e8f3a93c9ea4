"""Rock regressions: regression.py work dirs and the rl-rock CLI's runs, as experiments."""
