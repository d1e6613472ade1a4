"""English, read by rules: the one home of archivist's phrase rules and word lists.

Meaning is judged by the judge seam (archivist.judge: a trained model, or the
configured LLM); what stays here is what a rule still does better or that
nothing else does yet: tokens and stems (text), single-valued attributes
(attributes, attributes_asked), whose a sentence is (subject, whose), time
expressions (timeground, temporal), the question and denial readers the
extractive answerer uses (question, phrasing, denial, query, evidence), the
words the no-LLM archivist reads a sentence with (statement), people
resolution's identity cues (identity) and reconciliation's change cues, the
baseline beside the judge (change). Each family's examples and look-alikes are
rows in tests/test_lang_families.py. A new case of meaning becomes training
data (training/judge/), not a pattern here.
"""
