"""Expert architectures (ResNet classifiers, YOLO detectors) behind one interface, and zoo building."""
from .base import Architecture, BadInput, Prediction, UnknownArchitecture
from .registry import architecture_from_spec

__all__ = ["Architecture", "BadInput", "Prediction", "UnknownArchitecture", "architecture_from_spec"]
