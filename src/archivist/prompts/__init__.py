"""One module per LLM task: response schema + prompt builder + NAME + VERSION.

Builders are pure: the session date and "now" are passed in, never read at
import. Bump VERSION whenever the rendered prompt or schema changes, so the
response cache never serves an answer to a different question.
"""
