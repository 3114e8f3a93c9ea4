"""The Supabase leaderboard and its Hugging Face trace datasets, read and matched to experiments.

`configured` lives here, not in `view`, so a console without a leaderboard never imports
supabase-py, huggingface_hub or the matching code."""

from __future__ import annotations

from services.core.config import Config


def configured(config: Config) -> bool:
    return bool(config.leaderboard.url)
