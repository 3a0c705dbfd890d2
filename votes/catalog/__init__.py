"""The catalog's models and answers: endpoints, what boards show of a model, answers and their cost."""
