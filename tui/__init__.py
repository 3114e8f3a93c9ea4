"""The console and the batch commands."""

import os

# Textual repaints at most TEXTUAL_FPS times a second. At its default of 60, a key press waits up to
# 16.7 ms for the next frame after its few ms of work; at 120 a key shows in ~5-10 ms. Frames are
# only drawn when something changed, so an idle console costs nothing more. A user's setting wins.
os.environ.setdefault("TEXTUAL_FPS", "120")
