"""What people are shown of helmop's resources and what they ask of them, read and written with the reader's
own client, so the CLI (``helmop get``, ``tree``, ``logs``, ``reconcile``) and the web UI show and do the same."""
