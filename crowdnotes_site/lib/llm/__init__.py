"""The LLM client (client.py, the only module importing openai), the step families with their
prompts and offline baselines (steps/), the judge pipeline, drafting and the helpfulness classifier."""
