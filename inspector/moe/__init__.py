"""The MoE language-model engine (the LLM room): Hugging Face MoE checkpoints with offloaded experts.

- checkpoint.py  a local checkpoint directory: config, shards, where each expert's tensors lie, the
                 non-expert weights; supported architectures and their key names
- store.py       expert weights by (layer, expert): read from the shards on demand, kept in a pool
                 that is a ledger of the shared runtime budget
- policies.py    what stays resident, where an expert computes, what to prefetch: ondemand, lru, ...
- offloaded.py   the experts module put in place of transformers' fused one: same math, weights
                 fetched through the policy
- model.py       build the model on the meta device, load the non-expert weights, put the offloaded
                 experts in, run
"""
