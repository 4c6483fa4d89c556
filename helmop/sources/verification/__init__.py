"""Signatures checked before a source's revision is published, beside the sources they guard: git commits and
tags signed with OpenPGP (:mod:`.openpgp`) or SSH (:mod:`.ssh`) keys (:mod:`.commits` says what each covers).
Every signature and key is hostile input: parsed within bounds, never trusted for more than it proves; a
failure names the object and the reason, and the previous revision stays published."""
