"""Context for assistant modes: the relevant code and knowledge, packed into a token budget."""
