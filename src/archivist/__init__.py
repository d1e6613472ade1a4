"""archivist: long-term, speaker-attributed memory for LLM assistants."""
