"""The demo language model: a small Mixtral trained here on the Python standard library.

No download is possible on a line box, so the LLM tab's default model is built
by the product itself (`inspector llm build-demo`): corpus.py gathers the text,
tokenizer.py trains a byte-level BPE on it, build.py trains the MoE and saves a
normal Hugging Face checkpoint directory that every other part opens like any
other local checkpoint.
"""
