"""Training the demo experts on synthetic boards (the only data this appliance ships).

- samples.py     rendered boards -> labelled crops per classifier and per detector
- classifier.py  one ResNet classifier per component type, plain PyTorch loop
- detector.py    the shared YOLO detectors, ultralytics trainer from a model yaml, offline
- demo_zoo.py    `inspector zoo build --demo`: all of it, cached, with a manifest of accuracies
"""
