"""Order notes: deterministic candidates, cue rules, readers, and the note-reading planner."""
