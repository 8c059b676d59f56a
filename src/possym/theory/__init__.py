"""Theory of the paper (Sections 3.4-3.5, Appendix F): the RoPE constructions T_Index and T_Retrieval as
real weights run through the project's attention code, the impossibility witnesses of Remark 3.1, and the
discrepancy of Definition 3.1 / Theorem 3.2 for constructed and trained heads. See docs/theory.md.
"""
