"""Writes azure_conv_sample.csv: a synthetic request trace in the format of Microsoft's Azure
LLM inference trace 2023 (AzurePublicDataset, AzureLLMInferenceDataset2023.md and
data/AzureLLMInferenceTrace_conv.csv / _code.csv: a CSV with the header
`TIMESTAMP,ContextTokens,GeneratedTokens`, one request a row, its invocation time written
`2023-11-16 18:15:46.6805900`) for the bundled azure_replay.rhai scenario. The published
trace has no prompt text and no session or prefix information: only when each request came
and its token counts, which is all this sample has too. Arrivals are Poisson (a 250 ms mean
gap) with bursts, prompt lengths long-tailed as in the conversation trace, answers shorter.
Deterministic (seed 42); run `python3 make_azure_sample.py` to rebuild."""
import datetime
import random

ROWS = 200
rng = random.Random(42)
start = datetime.datetime(2023, 11, 16, 18, 15, 46, 680590)
t = 0.0
with open("azure_conv_sample.csv", "w") as f:
    f.write("TIMESTAMP,ContextTokens,GeneratedTokens\n")
    for row in range(ROWS):
        if row > 0:
            # One gap in ten is a burst: the next request comes within 20 ms.
            t += rng.uniform(0.0, 0.02) if rng.random() < 0.1 else rng.expovariate(1 / 0.25)
        context = min(int(rng.lognormvariate(6.7, 0.9)) + 1, 8000)
        generated = min(int(rng.lognormvariate(4.8, 0.8)) + 1, 1000)
        at = start + datetime.timedelta(seconds=t)
        # Azure writes seven fractional digits; Python's microseconds give six.
        f.write(f"{at:%Y-%m-%d %H:%M:%S}.{at.microsecond:06d}0,{context},{generated}\n")
