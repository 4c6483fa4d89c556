"""Image automation: registries scanned for an image's tags (:mod:`.registry`), the tag a policy chooses
(:mod:`.policies`), Flux's setter markers rewritten in YAML (:mod:`.setters`), commit messages from Flux's
templates (:mod:`.template`), commits signed (:mod:`.signing`) and pushed (:mod:`.automation`, with
:mod:`helmop.sources.gitwrite`). Above the sources it reads with, below the controllers that run it."""
