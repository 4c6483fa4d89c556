"""SOPS-encrypted files, decrypted beside the sources that hold them: the format (:mod:`.sops`: values,
metadata, the MAC), its stores (:mod:`.stores`: YAML, JSON, dotenv, INI, binary), the keys a build may use
(:mod:`.keys`: age and OpenPGP; :mod:`.openpgp`: OpenPGP input read by its packet headers, and wrapped keys
opened in a bounded child process) and what a ConfigSync's build decrypts of a repository (:mod:`.repository`).

Written from the SOPS format (getsops.io and its source as reference; no code of it copied), on
``cryptography`` (AES-256-GCM), ``pyrage`` (age) and ``pysequoia`` (OpenPGP: no gpg agent, no keyring on disk; a
key goes over a pipe only to helmop's own child process that opens a wrapped data key within a memory limit and
a deadline). Every input is hostile: sizes, depth and key counts are bounded, every failure is a
:class:`~helmop.sources.errors.SourceError` with a reason naming the file, and no plaintext reaches a message."""
