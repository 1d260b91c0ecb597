"""The workings of `ctxoffload.tokens`, one job a module: the encodings loaded offline
(`encodings`), what a message costs (`costs`), the counters (`counters`) and the tracker of
a whole context (`tracker`). Users import from `ctxoffload.tokens`."""
