"""Adaptive retrieval's parts: query features, routers (rules, learned, LLM) and the quality check."""

from ragloom.retrieval.routing.features import FEATURE_NAMES, FEATURE_VERSION, features
from ragloom.retrieval.routing.quality import Quality, assess, weak_reasons
from ragloom.retrieval.routing.router import LearnedRouter, LLMRouter, Router, RouterError, RuleRouter, validate_choice

__all__ = ["FEATURE_NAMES", "FEATURE_VERSION", "LLMRouter", "LearnedRouter", "Quality", "Router", "RouterError",
           "RuleRouter", "assess", "features", "validate_choice", "weak_reasons"]
