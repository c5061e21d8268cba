"""Writes sharegpt_sample.json: synthetic conversations in the ShareGPT format
([{"id", "conversations": [{"from": "human"|"gpt", "value"}]}]) for the bundled
sharegpt.rhai scenario. Deterministic; run `python3 make_sharegpt_sample.py` to rebuild."""
import json
import random

rng = random.Random(42)
topics = ["a sourdough starter", "the French revolution", "binary search trees", "a marathon training plan",
          "photosynthesis", "the stock market", "a job interview", "Kubernetes networking", "climate models",
          "the Roman empire", "a vegetarian lasagna", "quantum entanglement", "a wedding speech",
          "learning Spanish", "a small garden", "electric cars", "the immune system", "jazz harmony",
          "a budget spreadsheet", "black holes", "a cover letter", "Rust lifetimes", "sleep hygiene",
          "the water cycle", "chess openings", "a team offsite", "solar panels", "medieval castles"]
asks = ["Explain {t} to a beginner.", "Write a short story about {t}.", "What are the pros and cons of {t}?",
        "Give me a step-by-step guide to {t}.", "Summarise the history of {t} in a few paragraphs.",
        "I am confused about {t}. Can you help me understand the key ideas?",
        "Compare two different approaches to {t} and recommend one.", "List ten questions people ask about {t}."]
words = ("the of and to in is that it for on with as was at by an be this from or have not are but "
         "which one all were they we when your can there use more if out so what about how each time "
         "first way could people my than been who its now find long down day did get come made may part "
         "over new sound take only little work know place year live me back give most very after thing "
         "our just name good sentence man think say great where help through much before line right too "
         "mean old any same tell boy follow came want show also around form three small set put end does "
         "another well large must big even such because turn here why ask went men read need land different "
         "home us move try kind hand picture again change off play spell air away animal house point page").split()


def text(n_words):
    out, sentence = [], []
    for _ in range(n_words):
        sentence.append(rng.choice(words))
        if len(sentence) >= rng.randint(8, 18):
            out.append(" ".join(sentence).capitalize() + ".")
            sentence = []
    if sentence:
        out.append(" ".join(sentence).capitalize() + ".")
    return " ".join(out)


convs = []
for i in range(240):
    topic = rng.choice(topics)
    question = rng.choice(asks).format(t=topic)
    context = text(int(rng.lognormvariate(3.8, 0.9)) % 700) if rng.random() < 0.6 else ""
    prompt = (context + "\n\n" + question).strip()
    answer = text(max(3, int(rng.lognormvariate(5.0, 0.8)) % 900))
    turns = [{"from": "human", "value": prompt}, {"from": "gpt", "value": answer}]
    if rng.random() < 0.3:
        turns += [{"from": "human", "value": "Thanks! Can you make it shorter?"}, {"from": "gpt", "value": text(40)}]
    convs.append({"id": f"sample_{i:04d}", "conversations": turns})

with open("sharegpt_sample.json", "w") as f:
    json.dump(convs, f, indent=1)
    f.write("\n")
