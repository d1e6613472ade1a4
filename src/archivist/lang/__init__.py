"""English, read by rules: the one home of archivist's phrase rules and word lists.

Meaning is judged by the judge seam (archivist.judge: a trained model, or the
configured LLM); what stays here is what a rule still does better or that
nothing else does yet: tokens and stems (text), single-valued attributes
(attributes), whose a sentence is (subject), time expressions (timeground,
temporal), and the question and denial readers the extractive answerer uses.
A new case of meaning becomes training data (training/judge/), not a pattern
here.
"""
