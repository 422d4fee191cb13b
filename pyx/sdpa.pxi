# sdpa: the op, its extern declarations and its plan introspection (filled by the sdpa work).
