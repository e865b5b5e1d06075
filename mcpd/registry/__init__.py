"""The aggregated table of what servers offer, under collision-free local names:
naming, curation and budgets. Pure bookkeeping: no I/O."""
