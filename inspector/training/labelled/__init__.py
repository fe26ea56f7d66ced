"""New experts from a plant's own labelled images (issue 52): read a labelled folder, split it by identity, teach a
classifier with its own classes, choose its operating threshold on held-out crops, evaluate it on others.

    folder.py     an ImageFolder (class = folder name): its classes, its crops, their identities and split
    sizing.py     the input size and resize policy an expert's crops call for, from the data
    trainer.py    the training loop: balanced sampling, augmentation, model selection, early stopping
    metrics.py    per-class precision/recall/F1, confusion, defect recall, false calls, the operating threshold
    teach.py      `zoo train --new`: all of the above, recorded in a zoo as a version
    evaluate.py   `zoo evaluate`: an expert against a labelled folder it never saw

Nothing here renders boards or knows the demo's six classes: the taxonomy is the folder's.
"""
