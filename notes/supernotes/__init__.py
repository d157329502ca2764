"""Supernotes: consensus candidates from stuck notes, principle filters, the personalized helpfulness
model (PHM), a simulated jury and the selection. Pure modules: eligibility, candidates, filters,
jury (numpy), phm (torch); services.py writes, selectors.py reads."""
