"""Builders of the decoder families: each builds a whole stack from the few
arguments in which its members differ, so a backbone states only those."""
