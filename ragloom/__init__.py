"""ragloom: documents to vectors and a knowledge graph. This package never imports dagster."""

__version__ = "0.1.0"
