"""Expert architectures (ResNet classifiers, YOLO detectors) behind one interface (base.py, registry.py), the
backends that run them (backends/), and zoo building. Nothing is imported here, so naming a backend on the command
line does not load torch; spec.py checks what a spec may name without torch, so reading a rule set does not either."""
